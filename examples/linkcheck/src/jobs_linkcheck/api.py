"""The module's HTTP routes, mounted by the API through the module's declaration.

- ``POST /linkcheck/sites/{site}/crawls`` ``{"start_url"?, "max_pages"?}`` starts a crawl of
  ``site`` (``host[:port]``): 202 with the new crawl, or 200 with the crawl of that site that is
  still queued or running (one active crawl per site);
- ``GET /linkcheck/sites/{site}/crawls``: the site's crawls, newest first;
- ``GET /linkcheck/sites/{site}/crawls/{crawl_id}``: one crawl (status, pages, broken);
- ``GET /linkcheck/sites/{site}/crawls/{crawl_id}/results[?broken=true]``: its checked URLs.

A crawl's id is its job's id: ``POST /jobs/{crawl_id}/cancel`` cancels it, ``GET /jobs/{id}``
shows its progress. Every route is the org's own (the API's org dependency, ``ctx.current_org``);
another org's crawl answers 404 like an absent one.

No ``from __future__ import annotations``: FastAPI reads the annotations of the routes, which
are closures, where they are defined.
"""

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Response
from jobs_core import PayloadInvalid
from jobs_core.modules import RouteContext
from jobs_postgres import enqueue
from pydantic import BaseModel, Field

from jobs_linkcheck import records
from jobs_linkcheck.crawl import normalize
from jobs_linkcheck.fetch import private_address
from jobs_linkcheck.jobs import CRAWL, MAX_PAGES, Settings, build_registry

NO_SUCH_CRAWL = "no such crawl"
SITE_DOC = "the site: host[:port] as it appears in its URLs, e.g. example.com or 127.0.0.1:8080"
Site = Annotated[str, Path(min_length=1, max_length=300, description=SITE_DOC)]


class StartCrawl(BaseModel):
    """Where the crawl starts (default ``https://{site}/``) and how many pages it checks."""

    start_url: str | None = Field(default=None, max_length=2048)
    max_pages: int = Field(default=100, ge=1, le=MAX_PAGES)


def routers(ctx: RouteContext) -> list[APIRouter]:
    """The module's router (the declaration's ``routers``)."""
    engine = ctx.module.engine
    if engine is None:
        raise RuntimeError("the linkcheck module needs a database (JOBS_STORE=memory has none)")
    registry = build_registry(ctx.module)
    settings = Settings.from_settings(ctx.module.settings)
    router = APIRouter(prefix="/linkcheck", tags=["linkcheck"])

    def checked_site(site: str) -> str:
        url = normalize(f"https://{site}/")
        if url is None or url != f"https://{site}/":
            raise PayloadInvalid([{"loc": ["path", "site"], "msg": "not a host[:port]"}])
        refused = None if settings.allow_private else private_address(site)
        if refused is not None:
            raise PayloadInvalid([{"loc": ["path", "site"], "msg": refused}])
        return site

    def crawl_of(org: str, site: str, crawl_id: uuid.UUID) -> records.Crawl:
        with records.connected(engine) as conn:
            crawl = records.get_crawl(conn, org, site, crawl_id)
        if crawl is None:
            raise HTTPException(404, NO_SUCH_CRAWL)
        return crawl

    @router.post("/sites/{site}/crawls", status_code=202)
    def start_crawl(
        org: Annotated[str, Depends(ctx.current_org)],
        site: Site,
        response: Response,
        body: StartCrawl | None = None,
    ) -> dict[str, Any]:
        """Start a crawl of the site, or return the one that is queued or running."""
        body = body or StartCrawl()
        payload = {
            "site": checked_site(site),
            "start_url": body.start_url or f"https://{site}/",
            "max_pages": body.max_pages,
        }
        with records.connected(engine) as conn:  # the crawl's row and its job commit together
            enqueued = enqueue(conn, registry, org, CRAWL, payload)
            job = enqueued.job
            records.insert_crawl(conn, job.id, org, **job.payload)
            crawl = records.get_crawl(conn, org, site, job.id)
        if not enqueued.created:
            response.status_code = 200
        assert crawl is not None
        return crawl.to_json()

    @router.get("/sites/{site}/crawls")
    def list_crawls(
        org: Annotated[str, Depends(ctx.current_org)],
        site: Site,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> dict[str, Any]:
        """The site's crawls, newest first."""
        with records.connected(engine) as conn:
            found = records.list_crawls(conn, org, site, limit)
        return {"crawls": [crawl.to_json() for crawl in found]}

    @router.get("/sites/{site}/crawls/{crawl_id}")
    def get_crawl(
        org: Annotated[str, Depends(ctx.current_org)], site: Site, crawl_id: uuid.UUID
    ) -> dict[str, Any]:
        """One crawl: status, pages checked, broken links."""
        return crawl_of(org, site, crawl_id).to_json()

    @router.get("/sites/{site}/crawls/{crawl_id}/results")
    def crawl_results(
        org: Annotated[str, Depends(ctx.current_org)],
        site: Site,
        crawl_id: uuid.UUID,
        broken: bool = False,
    ) -> dict[str, Any]:
        """The crawl's checked URLs (``broken=true``: only 4xx, 5xx and no answer), each with
        the pages that link to it."""
        crawl = crawl_of(org, site, crawl_id)
        with records.connected(engine) as conn:
            found = records.list_results(conn, crawl_id, broken_only=broken)
        return {"crawl": crawl.to_json(), "results": found}

    return [router]
