"""The Imports module's HTTP routes, as a FastAPI router an API app includes.

The module owns its routes; the app gives it two things (so this package never imports the app):
how a request reaches the module's :class:`~jobs_imports.service.ImportsService`, and the
dependency that resolves the request's org (``jobs_api.auth.current_org``). Routes are thin:
parse, call a use case, map its errors.

Every route is org-scoped like the jobs routes: another org's site target or import answers
exactly like an absent one (404, same body), and so does a malformed id in the path.

Needs the ``api`` extra (FastAPI, python-multipart): ``jobs-imports[api]``.

No ``from __future__ import annotations`` here: the routes are closures whose parameter types
are built in :func:`build_router`, and FastAPI must evaluate those annotations where they are
defined, not later from the module's globals.
"""

import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Self

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Response
from fastapi import UploadFile as UploadFileParam
from fastapi.exceptions import RequestValidationError
from jobs_core import Job
from pydantic import BaseModel, Field

from jobs_imports.service import (
    ImportNotFound,
    ImportsService,
    ImportView,
    InvalidSiteTarget,
    InvalidUpload,
    ReconcileEvent,
    SiteTarget,
    SiteTargetExists,
    SiteTargetNotFound,
)
from jobs_imports.storage import FileTooLarge

__all__ = ["NO_SUCH_IMPORT", "NO_SUCH_SITE_TARGET", "UPLOAD_PATH", "build_router"]

UPLOAD_PATH = "/imports/csv"
"""The one route whose body is a file: an app's body-size limit must be larger for it."""
NO_SUCH_SITE_TARGET = "no such site target"
NO_SUCH_IMPORT = "no such import"
MAX_PAGES_PER_CALL = 50_000
NUL_FREE = r"^[^\x00]*$"
"""Text PostgreSQL can store: no NUL character (documented in the OpenAPI schema too)."""


# ---- schemas ------------------------------------------------------------------------------------


class SiteTargetIn(BaseModel):
    """A site to import search data for."""

    name: str = Field(min_length=1, max_length=200, pattern=NUL_FREE, examples=["Example shop"])
    base_url: str = Field(
        min_length=1,
        max_length=2000,
        pattern=NUL_FREE,
        description="The site's base URL (`example.com` means `https://example.com/`); "
        "relative URLs of exports and page lists resolve against it.",
        examples=["https://www.example.com"],
    )


class SiteTargetOut(BaseModel):
    """A site target."""

    id: uuid.UUID
    name: str
    base_url: str
    created_at: datetime

    @classmethod
    def of(cls, target: SiteTarget) -> Self:
        """The response body of a site target."""
        return cls(
            id=target.id, name=target.name, base_url=target.base_url, created_at=target.created_at
        )


class JobOut(BaseModel):
    """A job, as ``GET /jobs/{id}`` shows it."""

    id: uuid.UUID
    type: str
    status: str
    progress: dict[str, Any] | None
    report: dict[str, Any] | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> Self:
        """The response body of a job."""
        return cls(
            id=job.id,
            type=job.type,
            status=job.status.value,
            progress=dict(job.progress) if job.progress is not None else None,
            report=dict(job.report) if job.report is not None else None,
            error=job.error,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )


class FileOut(BaseModel):
    """The uploaded file: stored by content hash, the client's name kept for display."""

    name: str | None
    sha256: str
    size: int


class CountsOut(BaseModel):
    """The import's figures (final once the import is done)."""

    read: int
    inserted: int
    skipped: int = Field(description="Empty records, and records repeating an earlier one.")
    errors: int
    mapped: int = Field(
        description="Inserted rows mapped to a page as they were inserted; rows whose page "
        "arrives later are mapped by the site target's reconcile events."
    )


class ImportOut(BaseModel):
    """An import with its job."""

    id: uuid.UUID
    site_target_id: uuid.UUID
    kind: str = Field(description="csv (an uploaded file) or api (a date range of the source)")
    status: str = Field(description="pending, running, done, failed or cancelled")
    file: FileOut | None = Field(description="The uploaded file (null for an api import).")
    date_from: date | None = Field(description="The first day an api import asked for.")
    date_to: date | None = Field(description="The last day (inclusive) an api import asked for.")
    counts: CountsOut
    error: str | None
    error_samples: list[dict[str, Any]] = Field(
        description="The first 100 invalid records, with their line and the reason."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    job: JobOut | None

    @classmethod
    def of(cls, view: ImportView) -> Self:
        """The response body of an import."""
        record = view.record
        report = dict(record.report or {})
        samples = report.get("error_samples")
        if not isinstance(samples, list) and view.job is not None and view.job.progress:
            checkpoint = view.job.progress.get("checkpoint")  # running: the samples so far
            samples = checkpoint.get("error_samples") if isinstance(checkpoint, dict) else None
        return cls(
            id=record.id,
            site_target_id=record.site_target_id,
            kind=record.kind,
            status=view.status,
            file=FileOut(
                name=record.original_name, sha256=record.file_sha256, size=record.file_size
            )
            if record.kind == "csv"
            else None,
            date_from=record.date_from,
            date_to=record.date_to,
            counts=CountsOut(
                read=record.rows_read,
                inserted=record.rows_inserted,
                skipped=record.rows_skipped,
                errors=record.rows_errors,
                mapped=int(report.get("mapped", 0)),
            ),
            error=view.error,
            error_samples=samples if isinstance(samples, list) else [],
            created_at=record.created_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            job=JobOut.of(view.job) if view.job is not None else None,
        )


class ReconcileEventOut(BaseModel):
    """A ``map_reconcile`` run of the site target: an event of its Imports tab."""

    job_id: uuid.UUID
    status: str
    mapped: int | None = Field(description="Rows newly mapped to a page by this run.")
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, event: ReconcileEvent) -> Self:
        """The response body of a reconcile event."""
        return cls(
            job_id=event.job_id,
            status=event.status,
            mapped=event.mapped,
            error=event.error,
            created_at=event.created_at,
            started_at=event.started_at,
            finished_at=event.finished_at,
        )


class ImportsOut(BaseModel):
    """A site target's imports and reconcile events, newest first."""

    site_target_id: uuid.UUID
    imports: list[ImportOut]
    reconcile_events: list[ReconcileEventOut]


class PagesIn(BaseModel):
    """Pages of the site target: absolute URLs, or paths relative to its base URL."""

    urls: list[str] = Field(min_length=1, max_length=MAX_PAGES_PER_CALL)


class PagesOut(BaseModel):
    """What loading pages did; ``reconcile_job`` maps the imported rows to them."""

    received: int
    added: int
    known: int
    invalid: int
    invalid_samples: list[dict[str, str]]
    reconcile_job: JobOut | None


# ---- routes -------------------------------------------------------------------------------------

_ERRORS = {
    400: "The request body could not be decoded (not UTF-8 JSON text, or a broken form).",
    401: "Missing, malformed, unknown or revoked bearer token (always the same body).",
    404: "No such site target or import: absent or another org's (always the same body).",
    409: "The org already has a site target with this base URL.",
    413: "The request body (or the file) is larger than the limit.",
    422: "The request is invalid (`errors` lists the rejected fields, `detail` says why).",
    503: "The database cannot be reached; retry later.",
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses: the app documents every error response
    as a problem document (``application/problem+json``)."""
    return {status: {"description": _ERRORS[status]} for status in statuses}


def _parse_id(raw: str, detail: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise HTTPException(404, detail) from None


def build_router(
    get_service: Callable[..., ImportsService],
    current_org: Callable[..., str],
) -> APIRouter:
    """The Imports routes.

    ``get_service`` (a FastAPI dependency) returns the module's service;
    ``current_org`` is the FastAPI dependency that authenticates the request and names its org.
    ``POST /imports/csv`` stores at most the service's ``max_upload_bytes`` (413 beyond): the
    app's own body limit must let that much through on this path (:data:`UPLOAD_PATH`), plus
    the multipart envelope.
    """
    from jobs_imports.api_routes import api_source_routes  # it uses this module's schemas

    router = APIRouter(tags=["imports"])
    _site_target_routes(router, get_service, current_org)
    _import_routes(router, get_service, current_org)
    api_source_routes(router, get_service, current_org)
    return router


def _site_target_routes(
    router: APIRouter,
    get_service: Callable[..., ImportsService],
    current_org: Callable[..., str],
) -> None:
    OrgDep = Annotated[str, Depends(current_org)]  # noqa: N806 - a type alias
    ServiceDep = Annotated[ImportsService, Depends(get_service)]  # noqa: N806 - a type alias

    @router.post(
        "/site-targets",
        status_code=201,
        response_model=SiteTargetOut,
        summary="Create a site target",
        responses=_errors(400, 401, 409, 413, 422, 503),
    )
    def create_site_target(body: SiteTargetIn, org: OrgDep, service: ServiceDep) -> SiteTargetOut:
        """A site whose search data will be imported; 409 if the org has one at that URL."""
        try:
            return SiteTargetOut.of(service.create_site_target(org, body.name, body.base_url))
        except InvalidSiteTarget as error:
            raise HTTPException(422, str(error)) from None
        except SiteTargetExists as error:
            raise HTTPException(409, str(error)) from None

    @router.get(
        "/site-targets",
        response_model=list[SiteTargetOut],
        summary="List site targets",
        responses=_errors(401, 503),
    )
    def list_site_targets(org: OrgDep, service: ServiceDep) -> list[SiteTargetOut]:
        """The org's site targets, oldest first."""
        return [SiteTargetOut.of(target) for target in service.list_site_targets(org)]

    @router.get(
        "/site-targets/{site_target_id}",
        response_model=SiteTargetOut,
        summary="Get a site target",
        responses=_errors(401, 404, 503),
    )
    def get_site_target(site_target_id: str, org: OrgDep, service: ServiceDep) -> SiteTargetOut:
        """The site target; 404 if absent or another org's."""
        target_id = _parse_id(site_target_id, NO_SUCH_SITE_TARGET)
        try:
            return SiteTargetOut.of(service.get_site_target(org, target_id))
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None

    @router.post(
        "/site-targets/{site_target_id}/pages",
        response_model=PagesOut,
        summary="Add pages to a site target",
        responses=_errors(400, 401, 404, 413, 422, 503),
    )
    def add_pages(site_target_id: str, body: PagesIn, org: OrgDep, service: ServiceDep) -> PagesOut:
        """Add pages (normalized, duplicates ignored) and request the target's reconcile, which
        maps the imported rows to them."""
        target_id = _parse_id(site_target_id, NO_SUCH_SITE_TARGET)
        try:
            added = service.add_pages(org, target_id, body.urls)
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None
        return PagesOut(
            received=added.received,
            added=added.added,
            known=added.known,
            invalid=added.invalid,
            invalid_samples=added.invalid_samples,
            reconcile_job=JobOut.of(added.reconcile_job) if added.reconcile_job else None,
        )


def _import_routes(
    router: APIRouter,
    get_service: Callable[..., ImportsService],
    current_org: Callable[..., str],
) -> None:
    OrgDep = Annotated[str, Depends(current_org)]  # noqa: N806 - a type alias
    ServiceDep = Annotated[ImportsService, Depends(get_service)]  # noqa: N806 - a type alias

    @router.post(
        UPLOAD_PATH,
        status_code=202,
        response_model=ImportOut,
        summary="Upload a search-analytics CSV",
        responses={
            200: {
                "model": ImportOut,
                "description": "The same content is already imported (or being imported) for "
                "this site target: that import, nothing imported again.",
            },
            **_errors(400, 401, 404, 413, 422, 503),
        },
    )
    def upload_csv(
        file: Annotated[UploadFileParam, File(description="The CSV export.")],
        site_target_id: Annotated[str, Form(description="The site target it belongs to.")],
        org: OrgDep,
        service: ServiceDep,
        response: Response,
        *,
        force: Annotated[
            bool,
            Form(
                description="Import the file even if the same content is already imported, "
                "or being imported, for this site target."
            ),
        ] = False,
    ) -> ImportOut:
        """Store the file under the data directory by its SHA-256 and enqueue its import; 202
        with the import and its job (poll ``GET /imports/{id}`` or ``GET /jobs/{job id}``).

        The same content already imported (or pending, or running) for the site target: 200
        with that import, nothing imported again (``force`` imports it anyway). After a failed
        or cancelled import of it, a new one is made."""
        try:
            target_id = uuid.UUID(site_target_id)
        except ValueError:
            raise HTTPException(422, "site_target_id must be a UUID") from None
        try:
            view = service.create_import(org, target_id, file.file, file.filename, force=force)
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None
        except InvalidUpload as error:
            loc = ("body", "file", "filename")
            raise RequestValidationError(
                [{"loc": loc, "msg": str(error), "type": "value_error"}]
            ) from None
        except FileTooLarge as error:
            raise HTTPException(413, str(error)) from None
        response.headers["Location"] = f"/imports/{view.record.id}"
        if not view.created:
            response.status_code = 200
        return ImportOut.of(view)

    @router.get(
        "/imports",
        response_model=ImportsOut,
        summary="List a site target's imports",
        responses=_errors(401, 404, 422, 503),
    )
    def list_imports(
        site_target_id: Annotated[str, Query(description="The site target.")],
        org: OrgDep,
        service: ServiceDep,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> ImportsOut:
        """The target's imports (status, counts, job) and its reconcile events, newest first."""
        target_id = _parse_id(site_target_id, NO_SUCH_SITE_TARGET)
        try:
            views = service.list_imports(org, target_id, limit)
            events = service.reconcile_events(org, target_id, limit)
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None
        return ImportsOut(
            site_target_id=target_id,
            imports=[ImportOut.of(view) for view in views],
            reconcile_events=[ReconcileEventOut.of(event) for event in events],
        )

    @router.get(
        "/imports/{import_id}",
        response_model=ImportOut,
        summary="Get an import",
        responses=_errors(401, 404, 503),
    )
    def get_import(import_id: str, org: OrgDep, service: ServiceDep) -> ImportOut:
        """The import with its status, counts and job; 404 if absent or another org's."""
        parsed = _parse_id(import_id, NO_SUCH_IMPORT)
        try:
            return ImportOut.of(service.get_import(org, parsed))
        except ImportNotFound:
            raise HTTPException(404, NO_SUCH_IMPORT) from None
