"""``import_csv``: stream an uploaded CSV into ``import_rows``, resumable after any crash.

One batch is one transaction that writes the batch's rows **and** the job's checkpoint (through
the job store bound to the same connection): after a crash the checkpoint names exactly the
records already written, so a re-run skips them and its counters continue where they were — the
final rows and figures are those of a clean run. ``ON CONFLICT DO NOTHING`` on the primary key
``(import_id, line_no)`` stays as the second line of defence. The checkpoint write is fenced by
the attempt's lease: an attempt whose job was swept and taken by another cannot commit a batch.

Rows whose page is already known are mapped as they are inserted. The last transaction takes no
rows: it marks the import done with its counts and requests the target's ``map_reconcile``
(see :mod:`jobs_imports.reconcile`), which maps the rows whose pages arrived meanwhile, so the
rows and the request to map them are published together. A re-run that finds the import done
returns its report.

Rows go through a temporary staging table filled with ``COPY`` and moved with one
``INSERT … SELECT … ORDER BY line_no ON CONFLICT DO NOTHING``: COPY is the fast path into
PostgreSQL, and the ordered insert makes the first of two identical records the one kept.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar, cast

from jobs_core import CancelReason, JobCancelled, JobContext, StoreRefused
from jobs_postgres.errors import unavailable_as_store_error
from sqlalchemy import Connection, RowMapping, delete, func, select, text, update

from jobs_imports import csvfile, storage
from jobs_imports.csvfile import ImportFileError, Record
from jobs_imports.endhooks import mark_import_cancelled, mark_import_failed
from jobs_imports.reconcile import request_reconcile
from jobs_imports.records import SiteTarget
from jobs_imports.screening import Screened
from jobs_imports.service import ImportsService
from jobs_imports.tables import import_rows, imports
from jobs_imports.urls import InvalidUrl, normalize_url

__all__ = [
    "ERROR_SAMPLES",
    "CsvImporter",
    "ImportState",
    "mark_import_cancelled",
    "mark_import_failed",
]

log = logging.getLogger("jobs.imports")

ERROR_SAMPLES = 100
"""How many invalid records the report lists (with line and reason); ``errors`` counts them all."""

_COLUMNS = (
    "import_id",
    "line_no",
    "site_target_id",
    "url",
    "normalized_url",
    "query",
    "date",
    "country",
    "device",
    "clicks",
    "impressions",
    "ctr",
    "position",
)
_COLUMN_LIST = ", ".join(_COLUMNS)
_STAGING = "import_rows_staging"
S = TypeVar("S", bound="ImportState")


@dataclass(slots=True)
class ImportState:
    """The counters of an import, saved as its job's checkpoint after every batch.

    ``records`` is how many records after the header are behind us (the resume offset);
    ``read = inserted + skipped + errors`` always holds; ``mapped`` counts the inserted rows
    mapped to a page as they were inserted.
    """

    import_id: str
    records: int = 0
    total: int | None = None
    read: int = 0
    inserted: int = 0
    skipped: int = 0
    errors: int = 0
    mapped: int = 0
    error_samples: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def resume(cls, import_id: uuid.UUID, progress: Mapping[str, Any] | None) -> Self:
        """The state saved in ``progress`` for this import, or a fresh one."""
        saved = (progress or {}).get("checkpoint")
        if not isinstance(saved, Mapping) or saved.get("import_id") != str(import_id):
            return cls(import_id=str(import_id))
        try:
            return cls(
                import_id=str(import_id),
                records=int(saved["records"]),
                total=None if saved.get("total") is None else int(saved["total"]),
                read=int(saved["read"]),
                inserted=int(saved["inserted"]),
                skipped=int(saved["skipped"]),
                errors=int(saved["errors"]),
                mapped=int(saved.get("mapped", 0)),
                error_samples=list(saved.get("error_samples", []))[:ERROR_SAMPLES],
            )
        except (KeyError, TypeError, ValueError):
            log.warning("ignoring an unreadable checkpoint of import %s", import_id)
            return cls(import_id=str(import_id))

    def error(self, line_no: int, reason: str) -> None:
        """Count an invalid record (and keep it if it is among the first ones)."""
        self.errors += 1
        if len(self.error_samples) < ERROR_SAMPLES:
            self.error_samples.append({"line": line_no, "reason": reason})

    def progress(self) -> dict[str, Any]:
        """The job's progress document: ``done/total`` and this state as the checkpoint."""
        return {"done": self.records, "total": self.total, "checkpoint": asdict(self)}

    def report(self) -> dict[str, Any]:
        """The figures of the import (spec Imports §4: read, inserted, skipped, errors), and
        ``mapped``: inserted rows whose page was already known (the reconcile maps the rest)."""
        return {
            "read": self.read,
            "inserted": self.inserted,
            "skipped": self.skipped,
            "errors": self.errors,
            "mapped": self.mapped,
            "error_samples": list(self.error_samples),
        }


ROW_KEY_SQL = (
    "md5(concat_ws(chr(31), s.url, coalesce(s.query, chr(30)), "
    "coalesce(to_char(s.date, 'YYYY-MM-DD'), chr(30)), coalesce(s.country, chr(30)), "
    "coalesce(s.device, chr(30))))::uuid"
)
"""The record's dimensions (url, query, date, country, device) hashed by the server: two records
with the same key say the same thing (``chr(30)`` stands for a missing value)."""


class LeaseLost(JobCancelled):
    """The job was swept and taken by another attempt: this one must stop writing."""


class _Batch:
    """The rows of one batch ready for COPY, and what the batch did to the counters."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self.rows)


def _prepare(
    records: Sequence[Record],
    state: ImportState,
    import_id: uuid.UUID,
    site_target_id: uuid.UUID,
    base_url: str,
) -> _Batch:
    batch = _Batch()
    for record in records:
        state.records += 1
        state.read += 1
        if record.empty:
            state.skipped += 1
            continue
        if record.problem is not None:
            state.error(record.line_no, record.problem)
            continue
        url = cast(str, record.url)
        try:
            normalized = normalize_url(url, base_url)
        except InvalidUrl as error:
            state.error(record.line_no, f"url is invalid: {error}")
            continue
        batch.rows.append(
            (
                import_id,
                record.line_no,
                site_target_id,
                url,
                normalized,
                record.query,
                record.day,
                record.country,
                record.device,
                record.clicks,
                record.impressions,
                record.ctr,
                record.position,
            )
        )
    return batch


def _write_rows(conn: Connection, batch: _Batch) -> tuple[int, int]:
    """COPY the batch into a staging table and move it into ``import_rows``; (rows inserted,
    of which mapped to a page already)."""
    if not batch.rows:
        return 0, 0
    # the columns of import_rows the batch carries, without their constraints
    conn.execute(
        text(
            f"CREATE TEMPORARY TABLE {_STAGING} ON COMMIT DROP AS "
            f"SELECT {_COLUMN_LIST} FROM import_rows WITH NO DATA"
        )
    )
    raw = conn.connection.driver_connection
    if raw is None:  # pragma: no cover - a live connection always has its driver connection
        raise RuntimeError("no driver connection for COPY")
    copy_sql = f"COPY {_STAGING} ({_COLUMN_LIST}) FROM STDIN"
    with raw.cursor() as cursor, cursor.copy(copy_sql) as copy:
        for row in batch.rows:
            copy.write_row(row)
    # Rows whose page is already known are mapped as they are inserted (probing
    # pages_target_url_key): the reconcile then only maps what pages arriving later match,
    # instead of rewriting every row a second time.
    staged = ", ".join(f"s.{column}" for column in _COLUMNS)
    counted = conn.execute(
        text(
            f"WITH inserted AS ("
            f" INSERT INTO import_rows ({_COLUMN_LIST}, row_key, page_id)"
            f" SELECT {staged}, {ROW_KEY_SQL}, p.id FROM {_STAGING} AS s"
            f" LEFT JOIN pages AS p"
            f" ON p.site_target_id = s.site_target_id AND p.normalized_url = s.normalized_url"
            f" ORDER BY s.line_no"
            f" ON CONFLICT DO NOTHING RETURNING page_id"
            f") SELECT count(*), count(page_id) FROM inserted"
        )
    ).one()
    return int(counted[0]), int(counted[1])


def _write_rows_one_by_one(conn: Connection, batch: _Batch, state: ImportState) -> tuple[int, int]:
    """:func:`_write_rows` for each row in a savepoint of its own: a row the database refuses
    (:class:`~jobs_core.StoreRefused`) is a row error with the server's reason, the others are
    written. Returns (rows inserted, mapped) over the rows kept; the refused ones leave
    ``batch`` (the caller counts ``len(batch)`` as written)."""
    inserted = mapped = 0
    kept: list[tuple[Any, ...]] = []
    for row in batch.rows:
        single = _Batch()
        single.rows.append(row)
        try:
            with unavailable_as_store_error(), conn.begin_nested():
                row_inserted, row_mapped = _write_rows(conn, single)
                conn.execute(text(f"DROP TABLE {_STAGING}"))
        except StoreRefused as error:
            state.error(int(row[1]), f"the database refused the record: {error}")
            continue
        kept.append(row)
        inserted += row_inserted
        mapped += row_mapped
    batch.rows = kept
    return inserted, mapped


class CsvImporter:
    """Runs ``import_csv`` jobs for one :class:`ImportsService` (engine, data dir, clock)."""

    def __init__(self, service: ImportsService, *, batch_size: int = 5000) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.service = service
        self.batch_size = batch_size

    def _save(self, conn: Connection, ctx: JobContext, state: ImportState) -> None:
        """Save the checkpoint in ``conn``'s transaction, fenced by the attempt's lease."""
        store = self.service.store.bound_to(conn)
        if not store.save_progress(ctx.job.ref, state.progress(), self.service.clock.now()):
            ctx.cancel(CancelReason.LEASE_LOST)
            raise LeaseLost("lease lost: the job was swept and taken by another attempt")

    def __call__(self, ctx: JobContext) -> dict[str, Any]:
        """The handler of ``import_csv``."""
        with unavailable_as_store_error():
            return self._run(ctx)

    def begin(
        self, ctx: JobContext, kind: type[S], import_kind: str = "csv"
    ) -> tuple[RowMapping, SiteTarget, S] | dict[str, Any]:
        """The import of ``ctx``'s job marked running, its target, and its state resumed from
        the job's checkpoint (``kind`` reads it) — or, when the import is already done, its
        report (a re-run after the final commit). Rows the checkpoint does not account for
        (a progress document overwritten or lost) are deleted: the import starts over. An
        import of another kind than ``import_kind`` is :class:`ImportFileError`, untouched."""
        job = ctx.job
        import_id = uuid.UUID(str(ctx.payload["import_id"]))
        site_target_id = uuid.UUID(str(ctx.payload["site_target_id"]))
        with self.service.engine.begin() as conn:
            row = (
                conn.execute(
                    select(imports).where(
                        imports.c.id == import_id,
                        imports.c.org_id == job.org_id,
                        imports.c.site_target_id == site_target_id,
                    )
                )
                .mappings()
                .first()
            )
            if row is None:
                raise ImportFileError(f"import {import_id} does not exist for this site target")
            if row["kind"] != import_kind:
                raise ImportFileError(f"import {import_id} is not of kind {import_kind}")
            if row["status"] == "done":
                return dict(row["report"] or {})
            target = self.service.site_target_in(conn, job.org_id, site_target_id)
            conn.execute(
                update(imports)
                .where(imports.c.id == import_id)
                .values(
                    status="running",
                    error=None,
                    started_at=func.coalesce(imports.c.started_at, func.now()),
                )
            )
            state = kind.resume(import_id, ctx.checkpoint)
            present = conn.execute(
                select(func.count()).where(import_rows.c.import_id == import_id)
            ).scalar_one()
            if present != state.inserted:
                if state.records or present:
                    log.warning(
                        "import %s: checkpoint says %d rows, table has %d; starting over",
                        import_id,
                        state.inserted,
                        present,
                    )
                conn.execute(delete(import_rows).where(import_rows.c.import_id == import_id))
                state = kind(import_id=str(import_id))
        return row, target, state

    def _run(self, ctx: JobContext) -> dict[str, Any]:
        import_id = uuid.UUID(str(ctx.payload["import_id"]))
        site_target_id = uuid.UUID(str(ctx.payload["site_target_id"]))
        engine = self.service.engine
        started = self.begin(ctx, ImportState)
        if isinstance(started, dict):
            return started
        row, target, state = started
        path = storage.resolve(self.service.data_dir, row["file_path"])
        if not path.is_file():
            raise ImportFileError(f"the uploaded file is missing from the data directory: {path}")

        # Line by line first: a bad record becomes a row error, not a failed file (screening).
        screened = csvfile.screen_file(path)
        try:
            readable = screened.path if screened is not None else path
            fmt = None if screened is None else csvfile.detect_format(readable)
            extra: dict[str, Any] = {}
            if fmt is None:
                state.total = 0
                extra["empty"] = True
            else:
                extra["format"] = fmt.describe()
                if state.total is None:
                    state.total = csvfile.count_records(readable, fmt)
                    with engine.begin() as conn:
                        self._save(conn, ctx, state)
                self._stream(
                    ctx,
                    path=readable,
                    fmt=fmt,
                    state=state,
                    import_id=import_id,
                    site_target_id=site_target_id,
                    base_url=target.base_url,
                    screened=screened,
                )
        finally:
            if screened is not None:
                screened.discard()
        return self.finish(ctx, state, import_id, site_target_id, extra)

    def _stream(
        self,
        ctx: JobContext,
        *,
        path: Path,
        fmt: csvfile.CsvFormat,
        state: ImportState,
        import_id: uuid.UUID,
        site_target_id: uuid.UUID,
        base_url: str,
        screened: Screened | None = None,
    ) -> None:
        batches = csvfile.iter_batches(
            path, fmt, start=state.records, batch_size=self.batch_size, screened=screened
        )
        for records in batches:
            ctx.raise_if_cancelled()
            self.write_batch(
                ctx,
                records,
                state,
                import_id=import_id,
                site_target_id=site_target_id,
                base_url=base_url,
            )

    def write_batch(
        self,
        ctx: JobContext,
        records: Sequence[Record],
        state: ImportState,
        *,
        import_id: uuid.UUID,
        site_target_id: uuid.UUID,
        base_url: str,
    ) -> None:
        """Validate ``records``, write the valid ones and save ``state`` as the checkpoint, in
        one transaction: the one path of every import's rows (``import_api`` too)."""
        batch = _prepare(records, state, import_id, site_target_id, base_url)
        try:
            with unavailable_as_store_error(), self.service.engine.begin() as conn:
                counts = _write_rows(conn, batch)
                self._count_and_save(conn, ctx, state, len(batch), counts)
        except StoreRefused:
            # A record the database refuses (a value out of its range or over its limits):
            # the batch again, one row at a time, so only the refused rows are errors.
            with self.service.engine.begin() as conn:
                counts = _write_rows_one_by_one(conn, batch, state)
                self._count_and_save(conn, ctx, state, len(batch), counts)

    def _count_and_save(
        self,
        conn: Connection,
        ctx: JobContext,
        state: ImportState,
        written: int,
        counts: tuple[int, int],
    ) -> None:
        inserted, mapped = counts
        state.inserted += inserted
        state.mapped += mapped
        state.skipped += written - inserted  # a record repeating an earlier one
        self._save(conn, ctx, state)

    def finish(
        self,
        ctx: JobContext,
        state: ImportState,
        import_id: uuid.UUID,
        site_target_id: uuid.UUID,
        extra: Mapping[str, Any],
    ) -> dict[str, Any]:
        report = {**state.report(), **extra}
        with self.service.engine.begin() as conn:
            reconcile = request_reconcile(
                self.service.jobs_in(conn), conn, ctx.job.org_id, site_target_id
            )
            report["reconcile_job_id"] = str(reconcile.id)
            conn.execute(
                update(imports)
                .where(imports.c.id == import_id)
                .values(
                    status="done",
                    rows_read=state.read,
                    rows_inserted=state.inserted,
                    rows_skipped=state.skipped,
                    rows_errors=state.errors,
                    report=report,
                    error=None,
                    finished_at=func.now(),
                )
            )
            self._save(conn, ctx, state)
        log.info(
            "import %s done: read %d, inserted %d, skipped %d, errors %d",
            import_id,
            state.read,
            state.inserted,
            state.skipped,
            state.errors,
        )
        return report
