"""The Imports use cases: site targets, pages, uploads, and reading imports back.

Entry points (the API router, the CLI) call these and nothing else. Every method is org-scoped:
another org's site target or import is :class:`SiteTargetNotFound` / :class:`ImportNotFound`,
exactly like an absent one. Writes that must be followed by a job enqueue it in the same
transaction, through the job store bound to that transaction's connection: the row and its job
commit together or not at all.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from jobs_core import Clock, Job, JobNotFound, JobService, Registry, Status, SystemClock, uuid7
from jobs_core.registry import text_problem
from jobs_postgres.errors import unavailable_as_store_error, unique_violation
from jobs_postgres.schema import jobs as jobs_table
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Connection, Engine, exc, func, insert, select, text, update

from jobs_imports import storage
from jobs_imports.hosts import non_public_reason
from jobs_imports.reconcile import RECONCILE, request_reconcile
from jobs_imports.records import (
    MAX_FILE_NAME_LENGTH,
    ImportNotFound,
    ImportsError,
    ImportView,
    InvalidSiteTarget,
    InvalidUpload,
    PagesAdded,
    ReconcileEvent,
    SearchTotals,
    SiteTarget,
    SiteTargetExists,
    SiteTargetNotFound,
    StoredImport,
    site_target_of,
    stored_import_of,
)
from jobs_imports.tables import imports, pages, site_targets
from jobs_imports.urls import InvalidUrl, normalize_url

__all__ = [
    "IMPORT_CSV",
    "ImportNotFound",
    "ImportView",
    "ImportsError",
    "ImportsService",
    "InvalidSiteTarget",
    "InvalidUpload",
    "PagesAdded",
    "ReconcileEvent",
    "SearchTotals",
    "SiteTarget",
    "SiteTargetExists",
    "SiteTargetNotFound",
    "StoredImport",
]

IMPORT_CSV = "import_csv"
DEFAULT_MAX_UPLOAD_BYTES = 512 * 1024 * 1024
_PAGE_CHUNK = 5000
_INVALID_SAMPLES = 100


class ImportsService:
    """The Imports use cases over one engine, one data directory and the module's job types.

    ``registry`` must hold ``import_csv``, ``import_api`` and ``map_reconcile`` (the module's
    registry, or an app's registry that includes it): jobs are enqueued through it.
    """

    def __init__(
        self,
        engine: Engine,
        data_dir: Path,
        registry: Registry,
        *,
        clock: Clock | None = None,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        allow_private_urls: bool = False,
    ) -> None:
        self.engine = engine
        self.data_dir = Path(data_dir)
        self.clock: Clock = clock or SystemClock()
        self.store = PostgresJobStore(engine)
        self.jobs = JobService(self.store, registry, self.clock)
        self.max_upload_bytes = max_upload_bytes
        self.allow_private_urls = allow_private_urls

    def _host_refused(self, url: str) -> str | None:
        """Why a site target or page URL may not be used (a non-public host), or None."""
        if self.allow_private_urls:
            return None
        reason = non_public_reason(url)
        if reason is None:
            return None
        return f"{reason} (set JOBS_ALLOW_PRIVATE_URLS=1 to allow it in development)"

    def jobs_in(self, conn: Connection) -> JobService:
        """The job use cases inside ``conn``'s transaction (enqueues commit with it)."""
        return self.jobs.using(self.store.bound_to(conn))

    # -- site targets ----------------------------------------------------------------------------
    def create_site_target(self, org_id: str, name: str, base_url: str) -> SiteTarget:
        """Create a site target; ``base_url`` may omit its scheme (``example.com`` → https)."""
        name = name.strip()
        if not name:
            raise InvalidSiteTarget("the site target needs a name")
        for field_name, value in (("name", name), ("base_url", base_url)):
            if (problem := text_problem(value)) is not None:
                raise InvalidSiteTarget(f"{field_name}: {problem[0]}")
        raw = base_url.strip()
        if raw and "://" not in raw:
            raw = "https://" + raw
        try:
            normalized = normalize_url(raw)
        except InvalidUrl as error:
            raise InvalidSiteTarget(f"base_url: {error}") from None
        if (refused := self._host_refused(normalized)) is not None:
            raise InvalidSiteTarget(f"base_url: {refused}")
        target = SiteTarget(
            id=uuid7(), org_id=org_id, name=name, base_url=normalized, created_at=self.clock.now()
        )
        try:
            with unavailable_as_store_error(), self.engine.begin() as conn:
                conn.execute(
                    insert(site_targets).values(
                        id=target.id,
                        org_id=target.org_id,
                        name=target.name,
                        base_url=target.base_url,
                        created_at=target.created_at,
                    )
                )
        except exc.IntegrityError as error:
            if unique_violation(error):
                raise SiteTargetExists(
                    f"a site target with base URL {normalized} already exists"
                ) from None
            raise
        return target

    def get_site_target(self, org_id: str, site_target_id: uuid.UUID) -> SiteTarget:
        """The org's site target, or :class:`SiteTargetNotFound`."""
        with unavailable_as_store_error(), self.engine.connect() as conn:
            return self.site_target_in(conn, org_id, site_target_id)

    def site_target_in(
        self, conn: Connection, org_id: str, site_target_id: uuid.UUID
    ) -> SiteTarget:
        """The org's site target read on ``conn`` (inside the caller's transaction)."""
        row = (
            conn.execute(
                select(site_targets).where(
                    site_targets.c.id == site_target_id, site_targets.c.org_id == org_id
                )
            )
            .mappings()
            .first()
        )
        if row is None:
            raise SiteTargetNotFound()
        return site_target_of(row)

    def list_site_targets(self, org_id: str) -> list[SiteTarget]:
        """The org's site targets, oldest first."""
        with unavailable_as_store_error(), self.engine.connect() as conn:
            rows = conn.execute(
                select(site_targets)
                .where(site_targets.c.org_id == org_id)
                .order_by(site_targets.c.created_at, site_targets.c.id)
            ).mappings()
            return [site_target_of(row) for row in rows]

    # -- pages -----------------------------------------------------------------------------------
    def add_pages(self, org_id: str, site_target_id: uuid.UUID, urls: Iterable[str]) -> PagesAdded:
        """Add pages to a site target and request its reconcile, in one transaction.

        URLs are normalized (relative ones against the target's base URL); one already known
        is counted in ``known``, an invalid one in ``invalid`` (the first 100 with a reason).
        The reconcile is requested even when nothing was added: it is cheap, and it is what a
        caller loading pages expects to see happen.
        """
        with unavailable_as_store_error(), self.engine.begin() as conn:
            target = self.site_target_in(conn, org_id, site_target_id)
            received = 0
            invalid = 0
            samples: list[dict[str, str]] = []
            chosen: dict[str, str] = {}
            for raw in urls:
                received += 1
                try:
                    normalized = normalize_url(raw, target.base_url)
                    refused = (
                        None
                        if normalized.startswith(target.base_url)
                        else (self._host_refused(normalized))
                    )
                    if refused is not None:
                        raise InvalidUrl(refused)
                except InvalidUrl as error:
                    invalid += 1
                    if len(samples) < _INVALID_SAMPLES:
                        samples.append({"url": raw[:200], "reason": str(error)})
                    continue
                chosen.setdefault(normalized, raw.strip())
            added = 0
            items = list(chosen.items())
            for start in range(0, len(items), _PAGE_CHUNK):
                chunk = items[start : start + _PAGE_CHUNK]
                result = conn.execute(
                    text(
                        "INSERT INTO pages (site_target_id, url, normalized_url) "
                        "SELECT :target, u, n FROM unnest(CAST(:urls AS text[]), "
                        "CAST(:norms AS text[])) AS t(u, n) "
                        "ON CONFLICT (site_target_id, normalized_url) DO NOTHING"
                    ),
                    {
                        "target": site_target_id,
                        "urls": [raw for _, raw in chunk],
                        "norms": [norm for norm, _ in chunk],
                    },
                )
                added += int(result.rowcount)
            job = request_reconcile(self.jobs_in(conn), conn, org_id, site_target_id)
        return PagesAdded(
            received=received,
            added=added,
            known=len(chosen) - added,
            invalid=invalid,
            invalid_samples=samples,
            reconcile_job=job,
        )

    def count_pages(self, org_id: str, site_target_id: uuid.UUID) -> int:
        """How many pages the target has."""
        with unavailable_as_store_error(), self.engine.connect() as conn:
            self.site_target_in(conn, org_id, site_target_id)
            return int(
                conn.execute(
                    select(func.count()).where(pages.c.site_target_id == site_target_id)
                ).scalar_one()
            )

    # -- imports ---------------------------------------------------------------------------------
    def create_import(
        self,
        org_id: str,
        site_target_id: uuid.UUID,
        stream: BinaryIO,
        original_name: str | None = None,
        *,
        force: bool = False,
    ) -> ImportView:
        """Store an uploaded file by content hash, record the import, enqueue ``import_csv``.

        The same content uploaded again for the same site target is not imported twice: while
        an import of it is pending, running or done, that import is returned (``created``
        False) and nothing is recorded or enqueued; after a failed or cancelled one, or with
        ``force``, a new import is made. Two uploads of one content at once are serialised by
        a transaction lock on (org, site target, hash), so they give one import.

        The import row and its job commit together. Raises :class:`InvalidUpload` (a file name
        that cannot be stored) and :class:`SiteTargetNotFound` before reading the stream, and
        :class:`~jobs_imports.storage.FileTooLarge` past ``max_upload_bytes``.
        """
        name = (original_name or "").strip()[:MAX_FILE_NAME_LENGTH] or None
        if name is not None and (problem := text_problem(name)) is not None:
            raise InvalidUpload(f"the file name is refused: {problem[0]}")
        self.get_site_target(org_id, site_target_id)
        stored = storage.store_stream(self.data_dir, stream, max_bytes=self.max_upload_bytes)
        import_id = uuid7()
        with unavailable_as_store_error(), self.engine.begin() as conn:
            # the target may have been deleted while the file streamed in: re-check in the txn
            self.site_target_in(conn, org_id, site_target_id)
            if not force:
                earlier = self._same_content(conn, org_id, site_target_id, stored.sha256)
                if earlier is not None:
                    return dataclasses.replace(
                        self._view(earlier, self._job(org_id, earlier.job_id)), created=False
                    )
            conn.execute(
                insert(imports).values(
                    id=import_id,
                    org_id=org_id,
                    site_target_id=site_target_id,
                    kind="csv",
                    file_path=stored.path,
                    file_sha256=stored.sha256,
                    file_size=stored.size,
                    original_name=name,
                    status="pending",
                    created_at=self.clock.now(),
                )
            )
            job = (
                self.jobs_in(conn)
                .enqueue(
                    org_id,
                    IMPORT_CSV,
                    {"import_id": str(import_id), "site_target_id": str(site_target_id)},
                    dedup_key=f"{IMPORT_CSV}:{import_id}",
                )
                .job
            )
            conn.execute(update(imports).where(imports.c.id == import_id).values(job_id=job.id))
            record = self._import_row(conn, org_id, import_id)
        return self._view(record, job)

    def _same_content(
        self, conn: Connection, org_id: str, site_target_id: uuid.UUID, sha256: str
    ) -> StoredImport | None:
        """The latest pending, running or done import of this content for the site target, the
        transaction holding the lock of (org, site target, content) until it commits.
        Index: imports_org_target_sha_idx."""
        key = f"{org_id}\x1f{site_target_id}\x1f{sha256}"
        conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 2601))"), {"key": key}
        )
        row = (
            conn.execute(
                select(imports)
                .where(
                    imports.c.org_id == org_id,
                    imports.c.site_target_id == site_target_id,
                    imports.c.file_sha256 == sha256,
                    imports.c.status.in_(("pending", "running", "done")),
                )
                .order_by(imports.c.created_at.desc())
                .limit(1)
            )
            .mappings()
            .first()
        )
        return None if row is None else stored_import_of(row)

    def _import_row(self, conn: Connection, org_id: str, import_id: uuid.UUID) -> StoredImport:
        row = (
            conn.execute(
                select(imports).where(imports.c.id == import_id, imports.c.org_id == org_id)
            )
            .mappings()
            .first()
        )
        if row is None:
            raise ImportNotFound()
        return stored_import_of(row)

    def _job(self, org_id: str, job_id: uuid.UUID | None) -> Job | None:
        if job_id is None:
            return None
        try:
            return self.jobs.get(org_id, job_id)
        except JobNotFound:  # a finished import_csv job may have been deleted
            return None

    def _view(self, record: StoredImport, job: Job | None) -> ImportView:
        status, error = record.status, record.error
        if status in ("pending", "running") and job is not None:
            if job.status is Status.CANCELLED:
                status, error = "cancelled", error or job.error
            elif job.status is Status.FAILED:
                status, error = "failed", error or job.error or "the import job failed"
        return ImportView(record=record, job=job, status=status, error=error)

    def get_import(self, org_id: str, import_id: uuid.UUID) -> ImportView:
        """The org's import with its job, or :class:`ImportNotFound`."""
        with unavailable_as_store_error(), self.engine.connect() as conn:
            record = self._import_row(conn, org_id, import_id)
        return self._view(record, self._job(org_id, record.job_id))

    def list_imports(
        self, org_id: str, site_target_id: uuid.UUID, limit: int = 50
    ) -> list[ImportView]:
        """The target's imports, newest first (:class:`SiteTargetNotFound` if not the org's)."""
        with unavailable_as_store_error(), self.engine.connect() as conn:
            self.site_target_in(conn, org_id, site_target_id)
            rows = conn.execute(
                select(imports)
                .where(imports.c.org_id == org_id, imports.c.site_target_id == site_target_id)
                .order_by(imports.c.created_at.desc(), imports.c.id.desc())
                .limit(limit)
            ).mappings()
            records = [stored_import_of(row) for row in rows]
        return [self._view(record, self._job(org_id, record.job_id)) for record in records]

    def search_totals(self, org_id: str, site_target_id: uuid.UUID) -> SearchTotals:
        """The site target's search data as one consistent set: the view ``site_search_rows``
        (the union of its done imports, one value per record key, the latest upload winning),
        counted. :class:`SiteTargetNotFound` for another org's target."""
        with unavailable_as_store_error(), self.engine.connect() as conn:
            self.site_target_in(conn, org_id, site_target_id)
            rows, clicks, impressions = conn.execute(
                text(
                    "SELECT count(*), coalesce(sum(clicks), 0), coalesce(sum(impressions), 0)"
                    " FROM site_search_rows WHERE site_target_id = :id"
                ),
                {"id": site_target_id},
            ).one()
        return SearchTotals(int(rows), int(clicks), int(impressions))

    def reconcile_events(
        self, org_id: str, site_target_id: uuid.UUID, limit: int = 50
    ) -> list[ReconcileEvent]:
        """The target's ``map_reconcile`` jobs, newest first: the Imports tab's events.

        Read from the ``jobs`` table by the payload convention of docs/contract.md §1 (the scope
        id at the payload's top level), within the org's ``(org_id, type, created_at)`` index range.
        """
        with unavailable_as_store_error(), self.engine.connect() as conn:
            self.site_target_in(conn, org_id, site_target_id)
            rows = conn.execute(
                select(
                    jobs_table.c.id,
                    jobs_table.c.status,
                    jobs_table.c.report,
                    jobs_table.c.error,
                    jobs_table.c.created_at,
                    jobs_table.c.started_at,
                    jobs_table.c.finished_at,
                )
                .where(
                    jobs_table.c.org_id == org_id,
                    jobs_table.c.type == RECONCILE,
                    jobs_table.c.payload["site_target_id"].astext == str(site_target_id),
                )
                .order_by(jobs_table.c.created_at.desc(), jobs_table.c.id.desc())
                .limit(limit)
            ).mappings()
            events = []
            for row in rows:
                report = row["report"] or {}
                mapped = report.get("mapped") if isinstance(report, Mapping) else None
                events.append(
                    ReconcileEvent(
                        job_id=row["id"],
                        status=row["status"],
                        mapped=mapped if isinstance(mapped, int) else None,
                        error=row["error"],
                        created_at=row["created_at"],
                        started_at=row["started_at"],
                        finished_at=row["finished_at"],
                    )
                )
            return events
