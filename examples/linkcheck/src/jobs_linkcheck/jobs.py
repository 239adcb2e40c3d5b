"""The module's two job types, built on the deployment's database.

- ``linkcheck_crawl`` (one per crawl): walks the site in waves. A run hands the URLs found so
  far out to fetch jobs, its **children** (``ctx.enqueue_many``, written with its outcome), saves
  the frontier as the job's checkpoint, and **waits for them** (``ctx.wait_for_children()``):
  the crawl holds no worker slot while its fetches run, and runs again once they have all ended,
  to read back what they found (``linkcheck_results``), take their same-site links on and hand
  out the next wave — or, nothing left, aggregate the crawl's counts. Every run starts from the
  checkpoint, so a run that a ``kill -9`` interrupts is simply run again. **One active crawl per
  site**: its dedup key is ``linkcheck:{site}`` with ``dedup_scope=active``, so starting a crawl
  of a site that is being crawled returns that crawl.
- ``linkcheck_fetch`` (one per URL): fetches one page and records its status and links. **At
  most N fetches per site at once** (``JOBS_LINKCHECK_FETCHES_PER_SITE``, default 2): its
  ``concurrency_key`` is the payload's ``site``, global to every org (the limit is politeness
  towards the site, not a tenant's share), so the claim itself never starts more, across every
  worker process and org (docs/flow-control.md); and **at most M starts per second per site**
  (``JOBS_LINKCHECK_FETCHES_PER_SECOND``, default 10), the type's ``rate_limit`` over the same
  key.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from jobs_core import (
    DedupScope,
    Job,
    JobContext,
    JobType,
    KeyScope,
    PayloadInvalid,
    Registry,
    RetryPolicy,
    Status,
    StoreUnavailable,
    exponential,
)
from jobs_core.modules import ModuleContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy import Engine

from jobs_linkcheck import records
from jobs_linkcheck.crawl import Frontier, normalize, site_of
from jobs_linkcheck.fetch import USER_AGENT, PageResult, fetch_page, private_address
from jobs_linkcheck.lifecycle import (
    end_hooks,
    save_frontier,
    saved_frontier,
)

CRAWL = "linkcheck_crawl"
FETCH = records.FETCH
MAX_PAGES = 1000
"""The most pages one crawl checks (1,000 URLs of at most 1 KiB: a checkpoint under 8 MiB)."""

_RETRY_ON_OUTAGE = RetryPolicy(retry_on=(StoreUnavailable,), backoff=exponential(2.0, 2.0, 60.0))


@dataclass(frozen=True, slots=True)
class Settings:
    """The module's settings, read from the deployment's ``JOBS_LINKCHECK_*`` variables."""

    fetches_per_site: int = 2
    fetches_per_second: int = 10
    allow_private: bool = False
    fetch_timeout_s: float = 10.0

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Settings:
        """``JOBS_LINKCHECK_FETCHES_PER_SITE``, ``_FETCHES_PER_SECOND``, ``_ALLOW_PRIVATE``
        (``1``), ``_FETCH_TIMEOUT_S``."""
        return cls(
            fetches_per_site=int(settings.get("JOBS_LINKCHECK_FETCHES_PER_SITE", "2")),
            fetches_per_second=int(settings.get("JOBS_LINKCHECK_FETCHES_PER_SECOND", "10")),
            allow_private=settings.get("JOBS_LINKCHECK_ALLOW_PRIVATE", "0") == "1",
            fetch_timeout_s=float(settings.get("JOBS_LINKCHECK_FETCH_TIMEOUT_S", "10")),
        )


# -- payloads ----------------------------------------------------------------------------------


class CrawlPayload(BaseModel):
    """A crawl of ``site`` from ``start_url`` (a URL of that site), ``max_pages`` at most."""

    model_config = ConfigDict(extra="forbid")
    site: str = Field(min_length=1, max_length=300, description="host[:port], e.g. example.com")
    start_url: str = Field(min_length=1, max_length=2048)
    max_pages: int = Field(default=100, ge=1, le=MAX_PAGES)

    @model_validator(mode="after")
    def _on_its_site(self) -> CrawlPayload:
        url = normalize(self.start_url)
        if url is None or site_of(url) != self.site:
            raise ValueError(f"start_url must be an http(s) URL of the site {self.site!r}")
        self.start_url = url
        return self


class FetchPayload(BaseModel):
    """One URL of a crawl."""

    model_config = ConfigDict(extra="forbid")
    crawl_id: uuid.UUID
    site: str = Field(min_length=1)
    url: str = Field(min_length=1)


class ModelSchema:
    """A :class:`jobs_core.PayloadSchema` made of a pydantic model: its errors become a
    :class:`~jobs_core.PayloadInvalid` (HTTP 422 naming the field)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The payload normalized by the model, or ``PayloadInvalid``."""
        try:
            return self.model.model_validate(dict(payload)).model_dump(mode="json")
        except ValidationError as error:
            raise PayloadInvalid(
                [
                    {"loc": ["payload", *item["loc"]], "msg": item["msg"], "type": item["type"]}
                    for item in error.errors(include_url=False)
                ]
            ) from None

    def json_schema(self) -> dict[str, Any]:
        """The model's JSON Schema."""
        return self.model.model_json_schema()


# -- the job types -----------------------------------------------------------------------------


def build_registry(ctx: ModuleContext) -> Registry:
    """The module's job types on ``ctx.engine`` (the deployment's database)."""
    if ctx.engine is None:
        raise RuntimeError("the linkcheck module needs a database (JOBS_STORE=memory has none)")
    return build(ctx.engine, Settings.from_settings(ctx.settings))


def build(engine: Engine, settings: Settings) -> Registry:
    """The registry of ``linkcheck_crawl`` and ``linkcheck_fetch`` on ``engine``."""
    registry = Registry("linkcheck")
    handlers = Handlers(engine, settings)
    registry.register(
        JobType(
            name=CRAWL,
            handler=handlers.crawl,
            payload_schema=ModelSchema(CrawlPayload),
            dedup_key="linkcheck:{site}",
            dedup_scope=DedupScope.ACTIVE,
            max_attempts=5,
            timeout_s=300,
            retry=_RETRY_ON_OUTAGE,
            description="Check the links of a site: crawl it from a start URL, page by page.",
            **end_hooks(handlers.crawl_ended),
        )
    )
    registry.register(
        JobType(
            name=FETCH,
            handler=handlers.fetch,
            payload_schema=ModelSchema(FetchPayload),
            concurrency_key="site",
            concurrency_limit=settings.fetches_per_site,
            # Politeness towards the site is not any one tenant's: every org's fetches of a
            # site share its limit.
            concurrency_scope=KeyScope.GLOBAL,
            # And at most N starts per second per site, over the same key and scope: the claim
            # holds the next fetch of a site until its window has room (decision 0042).
            rate_limit=(settings.fetches_per_second, 1.0),
            max_attempts=3,
            timeout_s=max(60.0, 3 * settings.fetch_timeout_s),
            retry=_RETRY_ON_OUTAGE,
            description="Fetch one page of a link-check crawl: its status and its links.",
            **end_hooks(handlers.fetch_ended),
        )
    )
    return registry


class Handlers:
    """The handlers and hooks of the two types, sharing the engine and the settings (a crawl
    enqueues its fetch jobs as its children: ``ctx.enqueue_many``)."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings

    def crawl(self, ctx: JobContext) -> dict[str, Any]:
        """One wave of the crawl: read back the wave that ended (run again once its fetches
        have all ended), take their links on, hand the next wave out to fetch jobs (children)
        and wait for them; or, nothing left, finish with the crawl's counts."""
        crawl_id, org_id = ctx.job.id, ctx.job.org_id
        saved = saved_frontier(ctx)
        awaited = len(ctx.awaited().jobs)  # the fetches of every wave written so far
        if saved is None:  # the first run
            frontier, before = Frontier.start(ctx.payload["start_url"], ctx.payload["max_pages"]), 0
            with records.connected(self.engine) as conn:
                records.insert_crawl(conn, crawl_id, org_id, **ctx.payload)
                records.mark_running(conn, crawl_id)
        else:
            frontier, before = saved
        if frontier.pending and awaited == before:
            # The wave was handed out, but its run did not end with it written (a crash, a
            # shutdown): hand the same URLs out again.
            wave = list(frontier.pending)
        else:
            if frontier.pending:  # run again: every fetch of the last wave has ended
                self.settle(crawl_id, frontier)
            wave = frontier.hand_out(len(frontier.frontier))
        if wave:
            with records.connected(self.engine) as conn:
                records.hand_out(conn, crawl_id, wave)
            if not save_frontier(ctx, frontier, awaited):
                ctx.raise_if_cancelled()  # the attempt lost its job
                raise StoreUnavailable("the crawl's checkpoint could not be saved")
            # A cancel requested during this run outlives the wait: the core cancels the
            # waiting job at once (docs/contract.md, "Cancel"), and on_cancel marks the crawl.
            ctx.raise_if_cancelled()
            site = frontier.site
            ctx.enqueue_many(
                FETCH, [{"crawl_id": str(crawl_id), "site": site, "url": url} for url in wave]
            )
            ctx.wait_for_children(report={"wave": len(wave), "done": len(frontier.done)})
        save_frontier(ctx, frontier, awaited)  # the final progress (the crawl ends either way)
        with records.connected(self.engine) as conn:
            records.finish(conn, crawl_id, "done")
            broken = records.list_results(conn, crawl_id, broken_only=True)
        return {"pages": len(frontier.done), "broken": len(broken), "dropped": frontier.dropped}

    def settle(self, crawl_id: uuid.UUID, frontier: Frontier) -> None:
        """Take the results of the wave that ended on: each fetch recorded what it found; one
        that failed for good or was cancelled is recorded as broken by its hook, or here if the
        crawl runs first (the first record wins)."""
        with records.connected(self.engine) as conn:
            came_back = dict(records.fetched(conn, crawl_id, frontier.pending))
            for url in frontier.pending:
                if url not in came_back:
                    lost = PageResult(url, None, error="fetch job failed or was cancelled")
                    records.record(conn, crawl_id, lost)
        for url in list(frontier.pending):
            frontier.settle(url, came_back.get(url, ()))

    def crawl_ended(self, job: Job) -> None:
        """The crawl's job ended failed or cancelled: so does its row."""
        status = "cancelled" if job.status is Status.CANCELLED else "failed"
        with records.connected(self.engine) as conn:
            records.finish(conn, job.id, status, job.error)

    def fetch(self, ctx: JobContext) -> dict[str, Any]:
        """Fetch one URL of a crawl (unless the crawl ended, or it was fetched already)."""
        crawl_id = uuid.UUID(ctx.payload["crawl_id"])
        url, site = ctx.payload["url"], ctx.payload["site"]
        with records.connected(self.engine) as conn:
            status = records.crawl_status(conn, crawl_id)
            if status in records.FINAL:
                return {"skipped": f"the crawl is {status}"}
            if records.is_fetched(conn, crawl_id, url):
                return {"skipped": "fetched already"}
        ctx.raise_if_cancelled()  # a fetch told to stop before it started fetches nothing
        refused = None if self.settings.allow_private else private_address(site)
        if refused is not None:
            result = PageResult(url, None, error=f"not fetched: {refused}")
        else:
            timeout, headers = self.settings.fetch_timeout_s, {"User-Agent": USER_AGENT}
            with httpx.Client(timeout=timeout, headers=headers) as client:
                result = fetch_page(client, url, site)
        with records.connected(self.engine) as conn:
            records.record(conn, crawl_id, result)
        return {"status_code": result.status_code, "links": len(result.links)}

    def fetch_ended(self, job: Job) -> None:
        """A fetch that failed for good (or was cancelled) still settles its URL, or its crawl
        would wait for it forever."""
        why = "cancelled" if job.status is Status.CANCELLED else f"failed: {job.error}"
        result = PageResult(str(job.payload["url"]), None, error=f"fetch job {why}"[:500])
        with records.connected(self.engine) as conn:
            records.record(conn, uuid.UUID(str(job.payload["crawl_id"])), result)
