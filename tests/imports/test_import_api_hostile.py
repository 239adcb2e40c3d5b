"""``import_api`` against a source that misbehaves: a page that is not JSON or not a page, a
page over the size limit, a cursor loop, a source that never answers, rows that are not
records. Each ends clearly (failed with a reason, or a retry for a silent source), never hangs,
never reads without bound."""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from typing import TYPE_CHECKING

import pytest
from jobs_core import Status
from jobs_imports.registry import build_module

from tests.imports.api_source_kit import (  # noqa: F401 (fixtures: pytest sees them)
    RETRY_AT_ONCE,
    SETTINGS,
    api_module_fixture,
    api_target_fixture,
    figures,
    source_fixture,
    start,
)
from tests.imports.helpers import ORG, run_next

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import SiteTarget

    from tests.imports.fake_source import FakeSource

pytestmark = pytest.mark.postgres

DAY = date(2025, 1, 1)


def failed_with(module: ImportsModule, target: SiteTarget) -> str:
    """Run the import of ``target`` started last; it fails, without a retry: its error."""
    view = start(module, target, DAY)
    job = run_next(module, "import_api")
    assert job is not None
    assert job.status is Status.FAILED, job.error
    assert job.attempts == 1
    ended = module.service.get_import(ORG, view.record.id)
    assert ended.status == "failed"
    return ended.error or ""


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html>Service maintenance</html>", "a page that is not JSON (page 2 of "),
        (b"\xff\xfe\x00garbage", "a page that is not JSON"),
        (b'["a", "list"]', 'expected an object with a "rows" list'),
        (b'{"rows": "nope"}', 'expected an object with a "rows" list'),
        (b'{"rows": [], "next_cursor": 12}', "an unusable next_cursor"),
        (b'{"rows": [], "next_cursor": ""}', "an unusable next_cursor"),
    ],
)
def test_a_page_that_is_not_a_page_fails_clearly(
    api_module: ImportsModule,
    api_target: SiteTarget,
    source: FakeSource,
    body: bytes,
    says: str,
) -> None:
    source.body_for = lambda page: body if page == 2 else None
    assert says in failed_with(api_module, api_target)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
def test_a_huge_page_fails_without_being_read_whole(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource, declared: bool
) -> None:
    source.send_length = declared
    huge = json.dumps({"rows": [{"page": "/x" * 1000}] * 500, "next_cursor": None}).encode()
    assert len(huge) > 2 * SETTINGS.max_page_bytes
    source.body_for = lambda page: huge if page == 1 else None
    error = failed_with(api_module, api_target)
    assert f"a page larger than {SETTINGS.max_page_bytes} bytes (page 1 of " in error
    assert "JOBS_IMPORTS_API_MAX_PAGE_BYTES" in error


def test_a_cursor_loop_fails_after_the_pages_it_read(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    def looping(page: int) -> bytes | None:
        if page == 3:  # page 3 sends the cursor of page 2 again: 2, 3, 2, 3 ... forever
            rows = source.rows[6:9]
            return json.dumps({"rows": rows, "next_cursor": "p2"}).encode()
        return None

    source.body_for = looping
    error = failed_with(api_module, api_target)
    assert "a cursor loop: the next_cursor of page 3 was already sent" in error
    assert [r.page for r in source.requests] == [1, 2, 3]


def test_a_page_sending_its_own_cursor_is_a_loop(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    source.body_for = lambda page: b'{"rows": [], "next_cursor": "p2"}' if page == 2 else None
    assert "a cursor loop" in failed_with(api_module, api_target)


def test_a_source_that_never_answers_times_out_and_is_retried(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    reached, release = source.gate(2)
    view = start(api_module, api_target, DAY)
    impatient = build_module(
        api_module.service.engine,
        api_module.service.data_dir,
        api_settings=dataclasses.replace(SETTINGS, timeout_s=0.3),
        api_retry=RETRY_AT_ONCE,
    )
    job = run_next(impatient, "import_api")
    assert reached.is_set()
    assert job is not None
    assert job.status is Status.QUEUED  # retried: the source may answer next time
    assert "did not answer within 0.3 s (page 2 of" in (job.error or "")
    release.set()
    done = run_next(impatient, "import_api")
    assert done is not None
    assert done.status is Status.DONE, done.error
    assert figures(api_module, view.record.id)[1]["read"] == 10


def test_rows_that_are_not_records_are_row_errors(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    source.rows[:] = [
        {"page": "/a", "query": "ok", "clicks": 1, "impressions": 10, "date": "2025-01-01"},
        "a string",
        {"page": "/b", "query": "two\nlines", "clicks": 1},
        {"page": "/c", "clicks": {"nested": True}},
        {"page": "/d", "clicks": True},
        {"page": None, "query": None},
        {"URL": "/e", "Clicks": "1\u00a0234", "CTR": "12,5 %", "unknown": [1, 2]},
        {"page": "/f\u0000", "clicks": 1},
    ]
    view = start(api_module, api_target, DAY)
    job = run_next(api_module, "import_api")
    assert job is not None
    assert job.status is Status.DONE, job.error
    report = figures(api_module, view.record.id)[1]
    assert (report["read"], report["inserted"], report["skipped"]) == (8, 2, 1)
    assert [(s["line"], s["reason"]) for s in report["error_samples"]] == [
        (2, "the record is not a JSON object"),
        (3, "query holds a line break"),
        (4, 'clicks is not a whole number: {"nested": true}'),
        (5, "clicks is not a whole number: true"),
        (8, "url holds a NUL character"),
    ]
