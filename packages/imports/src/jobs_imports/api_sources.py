"""The API-import use cases: a site target's API source (configure, read back without its
secret) and starting an ``import_api`` of a date range.

The token is written here and read by :func:`source_secret` (the worker's handler) only: every
value this module returns to a caller is an :class:`ApiSourceView`, which says whether a token
is configured and never what it is (decision 0035).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from urllib.parse import urlsplit

from jobs_core import uuid7
from jobs_core.registry import text_problem
from jobs_postgres.errors import unavailable_as_store_error
from sqlalchemy import Connection, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from jobs_imports.records import ImportsError, ImportView, stored_import_of
from jobs_imports.service import ImportsService
from jobs_imports.tables import import_api_sources, imports
from jobs_imports.urls import InvalidUrl, normalize_url

__all__ = [
    "IMPORT_API",
    "MAX_RANGE_DAYS",
    "ApiSourceView",
    "ApiSources",
    "InvalidApiSource",
    "InvalidDateRange",
    "NoApiSource",
    "source_secret",
]

IMPORT_API = "import_api"
MAX_RANGE_DAYS = 1000
"""The longest date range one API import asks for."""
MAX_TOKEN_CHARS = 4096


class InvalidApiSource(ImportsError):
    """The API source's URL or token is not usable."""


class InvalidDateRange(ImportsError):
    """The date range of an API import is not usable."""


class NoApiSource(ImportsError):
    """The site target has no API source: configure one first
    (PUT /site-targets/{id}/api-source)."""


@dataclass(frozen=True, slots=True)
class ApiSourceView:
    """A site target's API source as anyone may see it: the URL, and whether a token is set."""

    site_target_id: uuid.UUID
    base_url: str
    token_configured: bool
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class SourceSecret:
    """What the worker needs to call the source. Never logged, never returned by a route."""

    base_url: str
    token: str

    def __repr__(self) -> str:  # a traceback or a debug print never shows the token
        return f"SourceSecret(base_url={self.base_url!r}, token=<redacted>)"


def source_secret(conn: Connection, org_id: str, site_target_id: uuid.UUID) -> SourceSecret:
    """The site target's source with its token (the handler's read), or :class:`NoApiSource`."""
    row = conn.execute(
        select(import_api_sources.c.base_url, import_api_sources.c.token).where(
            import_api_sources.c.site_target_id == site_target_id,
            import_api_sources.c.org_id == org_id,
        )
    ).first()
    if row is None:
        raise NoApiSource()
    return SourceSecret(base_url=row[0], token=row[1])


class ApiSources:
    """The API-import use cases on the module's :class:`ImportsService` (same engine, registry
    and host policy)."""

    def __init__(self, service: ImportsService) -> None:
        self.service = service

    def configure(
        self, org_id: str, site_target_id: uuid.UUID, base_url: str, token: str
    ) -> ApiSourceView:
        """Set (or replace) the site target's API source: an http(s) URL without credentials
        in it, on a public host (unless private URLs are allowed), and a bearer token."""
        raw = base_url.strip()
        for name, value in (("base_url", raw), ("token", token)):
            if (problem := text_problem(value)) is not None:
                raise InvalidApiSource(f"{name}: {problem[0]}")
        parts = urlsplit(raw)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidApiSource("base_url: an absolute http:// or https:// URL is needed")
        if parts.username is not None or parts.password is not None:
            raise InvalidApiSource("base_url: put the credentials in token, not in the URL")
        if parts.query or parts.fragment:
            raise InvalidApiSource("base_url: no query or fragment (the import adds its own)")
        try:
            normalized = normalize_url(raw)
        except InvalidUrl as error:
            raise InvalidApiSource(f"base_url: {error}") from None
        if (refused := self.service._host_refused(normalized)) is not None:
            raise InvalidApiSource(f"base_url: {refused}")
        token = token.strip()
        if not token or len(token) > MAX_TOKEN_CHARS or any(c.isspace() for c in token):
            raise InvalidApiSource(
                f"token: 1 to {MAX_TOKEN_CHARS} characters without spaces are needed"
            )
        now = self.service.clock.now()
        with unavailable_as_store_error(), self.service.engine.begin() as conn:
            self.service.site_target_in(conn, org_id, site_target_id)
            values = {"base_url": normalized, "token": token, "updated_at": now}
            conn.execute(
                pg_insert(import_api_sources)
                .values(site_target_id=site_target_id, org_id=org_id, **values)
                .on_conflict_do_update(index_elements=["site_target_id"], set_=values)
            )
        return ApiSourceView(site_target_id, normalized, True, now)

    def get(self, org_id: str, site_target_id: uuid.UUID) -> ApiSourceView:
        """The site target's API source without its token, or :class:`NoApiSource`."""
        with unavailable_as_store_error(), self.service.engine.connect() as conn:
            self.service.site_target_in(conn, org_id, site_target_id)
            row = conn.execute(
                select(
                    import_api_sources.c.base_url,
                    import_api_sources.c.token != "",
                    import_api_sources.c.updated_at,
                ).where(
                    import_api_sources.c.site_target_id == site_target_id,
                    import_api_sources.c.org_id == org_id,
                )
            ).first()
        if row is None:
            raise NoApiSource()
        return ApiSourceView(site_target_id, row[0], bool(row[1]), row[2])

    def start_import(
        self, org_id: str, site_target_id: uuid.UUID, date_from: date, date_to: date
    ) -> ImportView:
        """Record an API import of ``date_from``..``date_to`` (inclusive) and enqueue its
        ``import_api`` job, in one transaction.

        While an API import of the same range is pending or running for the site target, that
        one is returned (``created`` False). A done one is not: running a range again fetches
        it again (the consistent set keeps one value per record, so it does not double).
        """
        if date_to < date_from:
            raise InvalidDateRange("date_to is before date_from")
        if (date_to - date_from).days + 1 > MAX_RANGE_DAYS:
            raise InvalidDateRange(
                f"the range spans more than {MAX_RANGE_DAYS} days: import it in several ranges"
            )
        service = self.service
        with unavailable_as_store_error(), service.engine.begin() as conn:
            service.site_target_in(conn, org_id, site_target_id)
            source_secret(conn, org_id, site_target_id)  # NoApiSource before anything
            key = f"{org_id}\x1f{site_target_id}\x1f{date_from}\x1f{date_to}"
            conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 2602))"), {"key": key}
            )
            earlier = (
                conn.execute(
                    select(imports)
                    .where(
                        imports.c.org_id == org_id,
                        imports.c.site_target_id == site_target_id,
                        imports.c.kind == "api",
                        imports.c.date_from == date_from,
                        imports.c.date_to == date_to,
                        imports.c.status.in_(("pending", "running")),
                    )
                    .order_by(imports.c.created_at.desc())
                    .limit(1)
                )
                .mappings()
                .first()
            )
            if earlier is not None:
                record = stored_import_of(earlier)
                view = service._view(record, service._job(org_id, record.job_id))
                if view.status in ("pending", "running"):
                    return dataclasses.replace(view, created=False)
            import_id = uuid7()
            conn.execute(
                insert(imports).values(
                    id=import_id,
                    org_id=org_id,
                    site_target_id=site_target_id,
                    kind="api",
                    file_path="",
                    file_sha256="",
                    file_size=0,
                    original_name=None,
                    status="pending",
                    date_from=date_from,
                    date_to=date_to,
                    created_at=service.clock.now(),
                )
            )
            job = (
                service.jobs_in(conn)
                .enqueue(
                    org_id,
                    IMPORT_API,
                    {"import_id": str(import_id), "site_target_id": str(site_target_id)},
                )
                .job
            )
            conn.execute(update(imports).where(imports.c.id == import_id).values(job_id=job.id))
            record = service._import_row(conn, org_id, import_id)
        return service._view(record, job)
