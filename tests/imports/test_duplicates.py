"""An upload of content already imported for the site target returns that import instead of
importing it again (issue 26, item 2); a cancelled ``import_csv`` job leaves its import
``cancelled`` (item 4). On PostgreSQL, through the module's own service."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest
from jobs_imports.service import IMPORT_CSV
from sqlalchemy import text

from tests.imports.helpers import HEADER, ORG, drain, harness, queued, upload

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import ImportView, SiteTarget

pytestmark = pytest.mark.postgres

EXPORT = HEADER + (
    "https://www.example.com/a,shoes,10,100,10%,1.5,2025-01-01\n"
    "https://www.example.com/b,boots,5,50,10%,2.5,2025-01-02\n"
)
NOT_A_CSV = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _rows_of_target(module: ImportsModule, target: SiteTarget) -> int:
    with module.service.engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM import_rows WHERE site_target_id = :id"),
                {"id": target.id},
            ).scalar_one()
        )


def _imports_of(module: ImportsModule, target: SiteTarget) -> list[Any]:
    return module.service.list_imports(target.org_id, target.id)


def test_the_same_export_again_returns_its_import_and_adds_no_row(
    module: ImportsModule, target: SiteTarget
) -> None:
    first = upload(module, target, EXPORT)
    assert first.created
    drain(module)
    assert _rows_of_target(module, target) == 2

    again = upload(module, target, EXPORT, "the-same-export-renamed.csv")
    assert not again.created
    assert again.record.id == first.record.id
    assert again.status == "done"
    assert queued(module, ORG, IMPORT_CSV) == []  # nothing enqueued
    drain(module)
    assert _rows_of_target(module, target) == 2
    assert len(_imports_of(module, target)) == 1


def test_an_upload_of_content_still_pending_returns_that_import(
    module: ImportsModule, target: SiteTarget
) -> None:
    first = upload(module, target, EXPORT)
    again = upload(module, target, EXPORT)
    assert (again.created, again.record.id, again.status) == (False, first.record.id, "pending")
    assert len(queued(module, ORG, IMPORT_CSV)) == 1


def test_force_imports_the_same_content_again(module: ImportsModule, target: SiteTarget) -> None:
    first = upload(module, target, EXPORT)
    drain(module)
    forced = upload(module, target, EXPORT, force=True)
    assert forced.created
    assert forced.record.id != first.record.id
    drain(module)
    assert _rows_of_target(module, target) == 4  # asked for: the rows twice


def test_after_a_failed_import_the_same_content_is_imported_anew(
    module: ImportsModule, target: SiteTarget
) -> None:
    failed = upload(module, target, NOT_A_CSV)
    drain(module)
    assert module.service.get_import(target.org_id, failed.record.id).status == "failed"
    again = upload(module, target, NOT_A_CSV)
    assert again.created
    assert again.record.id != failed.record.id


def test_another_site_target_or_org_imports_the_same_content(
    module: ImportsModule, target: SiteTarget, target_b: SiteTarget
) -> None:
    mine = upload(module, target, EXPORT)
    other_org = upload(module, target_b, EXPORT)
    second_site = module.service.create_site_target(
        target.org_id, "second site", "https://second.example.com/"
    )
    other_site = upload(module, second_site, EXPORT)
    assert other_org.created
    assert other_site.created
    assert len({mine.record.id, other_org.record.id, other_site.record.id}) == 3


def test_two_uploads_of_one_content_at_once_make_one_import(
    module: ImportsModule, target: SiteTarget
) -> None:
    barrier = threading.Barrier(4)
    views: list[ImportView] = []
    lock = threading.Lock()

    def send() -> None:
        barrier.wait()
        view = upload(module, target, EXPORT)
        with lock:
            views.append(view)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(views) == 4
    assert len({view.record.id for view in views}) == 1
    assert sum(view.created for view in views) == 1
    assert len(queued(module, ORG, IMPORT_CSV)) == 1


def test_a_cancelled_import_job_leaves_its_import_cancelled(
    module: ImportsModule, target: SiteTarget
) -> None:
    view = upload(module, target, EXPORT)
    kit = harness(module)
    assert view.job is not None
    kit.cancel(view.job)
    # read before the job's on_cancel hook has run: the job's end is what the reader sees
    assert module.service.get_import(target.org_id, view.record.id).status == "cancelled"
    assert kit.run_end_hooks() == 1
    with module.service.engine.connect() as conn:
        stored = conn.execute(
            text("SELECT status, finished_at IS NOT NULL FROM imports WHERE id = :id"),
            {"id": view.record.id},
        ).one()
    assert tuple(stored) == ("cancelled", True)
    # and an upload of the same content after it is imported anew
    assert upload(module, target, EXPORT).created
