"""``import_api``: fetch a date range of search-analytics rows from the site target's API source,
page by page, resumable after any crash.

One page is one transaction, written by the path of ``import_csv``
(:meth:`~jobs_imports.importer.CsvImporter.write_batch`): the page's rows **and** the job's
checkpoint, which now names the cursor of the next page. After a crash the checkpoint says
exactly which pages are in, so a resumed attempt asks the source for the page after the last
committed one and its counters continue where they were: the final rows and figures are those
of a clean run. The last transaction marks the import done and requests the target's
``map_reconcile``, as for a CSV (:meth:`~jobs_imports.importer.CsvImporter.finish`).

What each answer of the source means (snooze, retry, fail) is decided in
:mod:`jobs_imports.api_client`. A cursor the source already sent in this attempt (a loop) fails
the import; so does a page too large, or not JSON. The token is read from the database at the
start of each attempt and goes into the request's ``Authorization`` header only.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from jobs_core import JobContext
from jobs_postgres.errors import unavailable_as_store_error

from jobs_imports.api_client import ApiSettings, SourceError, client_for, fetch_page, public_url
from jobs_imports.api_rows import records_of
from jobs_imports.api_sources import source_secret
from jobs_imports.importer import CsvImporter, ImportState

__all__ = ["ApiImporter", "ApiState"]

log = logging.getLogger("jobs.imports")


@dataclass
class ApiState(ImportState):
    """:class:`ImportState` and where the source's pages stand: ``cursor`` of the next page to
    fetch (None: the first, or none left once ``complete``), ``pages`` committed."""

    cursor: str | None = None
    pages: int = 0
    complete: bool = False

    @classmethod
    def resume(cls, import_id: uuid.UUID, progress: Mapping[str, Any] | None) -> Self:
        """The state saved in ``progress`` for this import, or a fresh one."""
        state = super().resume(import_id, progress)
        saved = (progress or {}).get("checkpoint")
        if not state.records or not isinstance(saved, Mapping):
            return state
        cursor, pages, complete = saved.get("cursor"), saved.get("pages"), saved.get("complete")
        if (
            (cursor is None or isinstance(cursor, str))
            and isinstance(pages, int)
            and isinstance(complete, bool)
        ):
            state.cursor, state.pages, state.complete = cursor, pages, complete
            return state
        log.warning("ignoring an unreadable checkpoint of import %s", import_id)
        return cls(import_id=str(import_id))


def _digest(cursor: str) -> bytes:
    return hashlib.blake2b(cursor.encode(), digest_size=16).digest()


class ApiImporter:
    """Runs ``import_api`` jobs: pages from the source, rows through ``writer`` (the module's
    :class:`CsvImporter`, which owns validation, writing, checkpoints and the final report)."""

    def __init__(self, writer: CsvImporter, settings: ApiSettings | None = None) -> None:
        self.writer = writer
        self.settings = settings or ApiSettings()

    def __call__(self, ctx: JobContext) -> dict[str, Any]:
        """The handler of ``import_api``."""
        with unavailable_as_store_error():
            return self._run(ctx)

    def _run(self, ctx: JobContext) -> dict[str, Any]:
        started = self.writer.begin(ctx, ApiState, "api")
        if isinstance(started, dict):
            return started
        row, target, state = started
        import_id, site_target_id = row["id"], row["site_target_id"]
        with self.writer.service.engine.connect() as conn:
            source = source_secret(conn, ctx.job.org_id, site_target_id)
        seen: set[bytes] = set()
        if state.cursor is not None:
            seen.add(_digest(state.cursor))
        with client_for(self.settings) as client:
            while not state.complete:
                ctx.raise_if_cancelled()
                page_no = state.pages + 1
                page = fetch_page(
                    client,
                    base_url=source.base_url,
                    token=source.token,
                    start=row["date_from"],
                    end=row["date_to"],
                    cursor=state.cursor,
                    settings=self.settings,
                    page_no=page_no,
                )
                following = page.next_cursor
                if following is not None:
                    if _digest(following) in seen:
                        raise SourceError(
                            f"the API source sent a cursor loop: the next_cursor of page "
                            f"{page_no} was already sent for an earlier page; the import stops "
                            "instead of reading the same pages again"
                        )
                    seen.add(_digest(following))
                records = records_of(page.rows, first_line=state.records + 1)
                state.cursor, state.pages = following, page_no
                state.complete = following is None
                self.writer.write_batch(
                    ctx,
                    records,
                    state,
                    import_id=import_id,
                    site_target_id=site_target_id,
                    base_url=target.base_url,
                )
        extra = {"source": {"url": public_url(source.base_url), "pages": state.pages}}
        return self.writer.finish(ctx, state, import_id, site_target_id, extra)
