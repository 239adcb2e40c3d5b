"""The HTTP routes of API imports: a site target's API source, and starting an import of a date
range. Part of the router :func:`jobs_imports.api.build_router` builds (same schemas, same
errors, same org scoping).

The token goes in, never out: ``PUT`` takes it, every answer says ``token_configured`` only.

No ``from __future__ import annotations``: FastAPI evaluates the routes' annotations where they
are defined (see :mod:`jobs_imports.api`).
"""

import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Self

from fastapi import APIRouter, Depends, HTTPException, Response
from pydantic import BaseModel, Field

from jobs_imports.api import NO_SUCH_SITE_TARGET, NUL_FREE, ImportOut, _errors, _parse_id
from jobs_imports.api_sources import (
    MAX_RANGE_DAYS,
    MAX_TOKEN_CHARS,
    ApiSources,
    ApiSourceView,
    InvalidApiSource,
    InvalidDateRange,
    NoApiSource,
)
from jobs_imports.service import ImportsService, SiteTargetNotFound

__all__ = ["api_source_routes"]

NO_API_SOURCE = (
    "the site target has no API source: configure it with PUT /site-targets/{id}/api-source"
)


class ApiSourceIn(BaseModel):
    """The search-analytics API a site target's rows are fetched from."""

    base_url: str = Field(
        min_length=1,
        max_length=2000,
        pattern=NUL_FREE,
        description="The URL pages are fetched from (`GET <base_url>?start_date=…&end_date=…"
        "&cursor=…`, docs/imports.md); http(s), no credentials, query or fragment in it.",
        examples=["https://search-api.example.net/v1/sites/example.com/rows"],
    )
    token: str = Field(
        min_length=1,
        max_length=MAX_TOKEN_CHARS,
        pattern=r"^\S+$",
        description="The bearer token sent to the source. Stored, never shown again: "
        "answers say `token_configured` only.",
        json_schema_extra={"writeOnly": True},
    )


class ApiSourceOut(BaseModel):
    """A site target's API source, without its token."""

    site_target_id: uuid.UUID
    base_url: str
    token_configured: bool = Field(description="A token is stored (it is never shown).")
    updated_at: datetime

    @classmethod
    def of(cls, view: ApiSourceView) -> Self:
        """The response body of an API source."""
        return cls(
            site_target_id=view.site_target_id,
            base_url=view.base_url,
            token_configured=view.token_configured,
            updated_at=view.updated_at,
        )


class ApiImportIn(BaseModel):
    """The date range to fetch from the site target's API source (both days included)."""

    site_target_id: uuid.UUID
    date_from: date = Field(examples=["2025-01-01"])
    date_to: date = Field(
        examples=["2025-01-31"], description=f"At most {MAX_RANGE_DAYS} days after date_from."
    )


_NO_SOURCE: dict[int | str, dict[str, Any]] = {
    409: {"description": "The site target has no API source: configure it first."}
}


def api_source_routes(
    router: APIRouter,
    get_service: Callable[..., ImportsService],
    current_org: Callable[..., str],
) -> None:
    """Add the API-import routes to ``router``."""
    OrgDep = Annotated[str, Depends(current_org)]  # noqa: N806 - a type alias
    ServiceDep = Annotated[ImportsService, Depends(get_service)]  # noqa: N806 - a type alias

    @router.put(
        "/site-targets/{site_target_id}/api-source",
        response_model=ApiSourceOut,
        summary="Configure a site target's API source",
        responses=_errors(400, 401, 404, 413, 422, 503),
    )
    def put_api_source(
        site_target_id: str, body: ApiSourceIn, org: OrgDep, service: ServiceDep
    ) -> ApiSourceOut:
        """Set or replace the URL and token ``import_api`` fetches the site target's rows with;
        the answer says ``token_configured`` and never shows the token."""
        target_id = _parse_id(site_target_id, NO_SUCH_SITE_TARGET)
        try:
            view = ApiSources(service).configure(org, target_id, body.base_url, body.token)
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None
        except InvalidApiSource as error:
            raise HTTPException(422, str(error)) from None
        return ApiSourceOut.of(view)

    @router.get(
        "/site-targets/{site_target_id}/api-source",
        response_model=ApiSourceOut,
        summary="Get a site target's API source",
        responses=_errors(401, 404, 503),
    )
    def get_api_source(site_target_id: str, org: OrgDep, service: ServiceDep) -> ApiSourceOut:
        """The API source's URL and whether a token is configured; 404 if none."""
        target_id = _parse_id(site_target_id, NO_SUCH_SITE_TARGET)
        try:
            return ApiSourceOut.of(ApiSources(service).get(org, target_id))
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None
        except NoApiSource:
            raise HTTPException(404, NO_API_SOURCE) from None

    @router.post(
        "/imports/api",
        status_code=202,
        response_model=ImportOut,
        summary="Start an API import of a date range",
        responses={
            200: {
                "model": ImportOut,
                "description": "An API import of the same range is pending or running for "
                "this site target: that import, nothing started again.",
            },
            **_errors(400, 401, 404, 413, 422, 503),
            **_NO_SOURCE,
        },
    )
    def start_api_import(
        body: ApiImportIn, org: OrgDep, service: ServiceDep, response: Response
    ) -> ImportOut:
        """Record an import of the range and enqueue its ``import_api`` job; 202 with the
        import and its job (poll ``GET /imports/{id}``). At most one API import runs per site
        target at a time; the same range while one is pending or running: 200 with it."""
        try:
            view = ApiSources(service).start_import(
                org, body.site_target_id, body.date_from, body.date_to
            )
        except SiteTargetNotFound:
            raise HTTPException(404, NO_SUCH_SITE_TARGET) from None
        except NoApiSource:
            raise HTTPException(409, NO_API_SOURCE) from None
        except InvalidDateRange as error:
            raise HTTPException(422, str(error)) from None
        response.headers["Location"] = f"/imports/{view.record.id}"
        if not view.created:
            response.status_code = 200
        return ImportOut.of(view)
