"""The module's two job types, built on the deployment's database.

- ``linkcheck_crawl`` (one per crawl): walks the site in short steps. A step reads back the
  fetches that ended (``linkcheck_results``), takes their same-site links on, hands new URLs out
  to fetch jobs, saves the frontier as the job's checkpoint, and snoozes: the crawl never holds
  a worker slot while it waits for its fetches, and every step starts from the checkpoint, so
  a step that a ``kill -9`` interrupts is simply run again. **One active crawl per site**: its
  dedup key is ``linkcheck:{site}`` with ``dedup_scope=active``, so starting a crawl of a site
  that is being crawled returns that crawl.
- ``linkcheck_fetch`` (one per URL): fetches one page and records its status and links. **At
  most N fetches per site at once** (``JOBS_LINKCHECK_FETCHES_PER_SITE``, default 2): its
  ``concurrency_key`` is the payload's ``site``, global to every org (the limit is politeness
  towards the site, not a tenant's share), so the claim itself never starts more, across every
  worker process and org (docs/flow-control.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from jobs_core import (
    Clock,
    DedupScope,
    Job,
    JobContext,
    JobService,
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
from jobs_postgres import jobs_in
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy import Connection, Engine

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
MAX_STEPS = 20_000
"""A crawl's ``max_snoozes``: enough for ``MAX_PAGES`` pages of slow fetches."""

_RETRY_ON_OUTAGE = RetryPolicy(retry_on=(StoreUnavailable,), backoff=exponential(2.0, 2.0, 60.0))


@dataclass(frozen=True, slots=True)
class Settings:
    """The module's settings, read from the deployment's ``JOBS_LINKCHECK_*`` variables."""

    fetches_per_site: int = 2
    allow_private: bool = False
    fetch_timeout_s: float = 10.0
    step_s: float = 0.5
    """How long a crawl waits between two steps (a snooze: it holds no worker slot meanwhile)."""

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Settings:
        """``JOBS_LINKCHECK_FETCHES_PER_SITE``, ``_ALLOW_PRIVATE`` (``1``), ``_FETCH_TIMEOUT_S``,
        ``_STEP_S``."""
        return cls(
            fetches_per_site=int(settings.get("JOBS_LINKCHECK_FETCHES_PER_SITE", "2")),
            allow_private=settings.get("JOBS_LINKCHECK_ALLOW_PRIVATE", "0") == "1",
            fetch_timeout_s=float(settings.get("JOBS_LINKCHECK_FETCH_TIMEOUT_S", "10")),
            step_s=float(settings.get("JOBS_LINKCHECK_STEP_S", "0.5")),
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
    return build(ctx.engine, Settings.from_settings(ctx.settings), ctx.clock)


def build(engine: Engine, settings: Settings, clock: Clock) -> Registry:
    """The registry of ``linkcheck_crawl`` and ``linkcheck_fetch`` on ``engine``."""
    registry = Registry("linkcheck")
    handlers = Handlers(engine, settings, registry, clock)
    registry.register(
        JobType(
            name=CRAWL,
            handler=handlers.crawl,
            payload_schema=ModelSchema(CrawlPayload),
            dedup_key="linkcheck:{site}",
            dedup_scope=DedupScope.ACTIVE,
            max_snoozes=MAX_STEPS,
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
            max_attempts=3,
            timeout_s=max(60.0, 3 * settings.fetch_timeout_s),
            retry=_RETRY_ON_OUTAGE,
            description="Fetch one page of a link-check crawl: its status and its links.",
            **end_hooks(handlers.fetch_ended),
        )
    )
    return registry


class Handlers:
    """The handlers and hooks of the two types, sharing the engine, the settings and the
    registry (a crawl enqueues its fetch jobs through it)."""

    def __init__(
        self, engine: Engine, settings: Settings, registry: Registry, clock: Clock
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.registry = registry
        self.clock = clock

    def crawl(self, ctx: JobContext) -> dict[str, Any]:
        """One step of the crawl: read back the fetches that ended, take their links on, hand
        new URLs out, save the frontier; then come back later (a snooze), or finish."""
        crawl_id, org_id = ctx.job.id, ctx.job.org_id
        frontier = saved_frontier(ctx)
        if frontier is None:  # the first step
            frontier = Frontier.start(ctx.payload["start_url"], ctx.payload["max_pages"])
            with records.connected(self.engine) as conn:
                records.insert_crawl(conn, crawl_id, org_id, **ctx.payload)
                records.mark_running(conn, crawl_id)
        with records.connected(self.engine) as conn:
            came_back = records.fetched(conn, crawl_id, frontier.pending)
        for url, links in came_back:
            frontier.settle(url, links)
        batch = frontier.hand_out(2 * self.settings.fetches_per_site - len(frontier.pending))
        if batch:
            with records.connected(self.engine) as conn:  # rows and jobs commit together
                records.hand_out(
                    conn, self.jobs(conn), org_id, crawl_id, site=frontier.site, urls=batch
                )
        # Not saved (the database was unreachable)? The next step replays this one from the
        # previous checkpoint: it hands out nothing twice (see records.hand_out).
        save_frontier(ctx, frontier)
        if not frontier.finished:
            # A cancel requested during this step outlives the snooze: the core cancels the
            # re-queued job at once (docs/contract.md, "Cancel"), and on_cancel marks the crawl.
            ctx.raise_if_cancelled()
            ctx.snooze(self.settings.step_s, f"{len(frontier.pending)} fetches out")
        with records.connected(self.engine) as conn:
            records.finish(conn, crawl_id, "done")
            broken = records.list_results(conn, crawl_id, broken_only=True)
        return {"pages": len(frontier.done), "broken": len(broken), "dropped": frontier.dropped}

    def jobs(self, conn: Connection) -> JobService:
        """The job use cases inside ``conn``'s transaction (transactional enqueue)."""
        return jobs_in(conn, self.registry, self.clock)

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
