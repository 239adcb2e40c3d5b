"""The demo job types of the design brief, registered when ``JOBS_DEMO_TYPES=1`` (and by
``jobs dev``): ``noop``, ``sleep``, ``fail``, ``crash``, and ``crawl_site`` (flow control:
docs/flow-control.md). All are public: any org may enqueue
them over HTTP, which makes them the way to watch the system work end to end."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from jobs_core import DedupScope, JobContext, JobType, Registry
from jobs_core.modules import Module, ModuleContext
from pydantic import BaseModel, ConfigDict, Field

from jobs_worker.schemas import PydanticSchema

registry = Registry("demo")
"""The demo types, declared as the development module :data:`module`."""

CRASH_EXIT_CODE = 137
"""What a process killed by SIGKILL reports (128 + 9): the crash looks like a native one."""

log = logging.getLogger("jobs.demo")


class NoopPayload(BaseModel):
    """Any object: the payload is ignored."""

    model_config = ConfigDict(extra="allow")


class SleepPayload(BaseModel):
    """How long to sleep."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    seconds: float = Field(ge=0, le=3600, strict=True, description="seconds to sleep, 0 to 3600")


class FailPayload(BaseModel):
    """The message of the error raised."""

    model_config = ConfigDict(extra="forbid")
    message: str = Field(
        default="demo failure", min_length=1, max_length=500, description="the error message"
    )


class CrashPayload(BaseModel):
    """No arguments."""

    model_config = ConfigDict(extra="forbid")


class CrawlPayload(BaseModel):
    """Which site to crawl, and for how long."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    site_id: int = Field(ge=1, description="the site to crawl")
    seconds: float = Field(default=0, ge=0, le=3600, description="how long the crawl lasts")


class DemoFailure(Exception):
    """The error the ``fail`` demo type raises."""


def noop(ctx: JobContext) -> Mapping[str, Any] | None:
    """Do nothing: the cost of the machinery alone (what the throughput benchmark drains)."""
    return None


def sleep(ctx: JobContext) -> Mapping[str, Any]:
    """Sleep ``seconds``, reporting ``done``/``total`` each second; stop on cancellation."""
    total = float(ctx.payload["seconds"])
    began = time.monotonic()
    ctx.report_progress(done=0, total=total, force=True)
    while (elapsed := time.monotonic() - began) < total:
        if ctx.wait_cancelled(min(1.0, total - elapsed)):
            ctx.raise_if_cancelled()
        done = min(total, time.monotonic() - began)
        ctx.report_progress(done=round(done, 1), total=total, force=True)
    return {"slept_s": total}


def fail(ctx: JobContext) -> Mapping[str, Any]:
    """Raise :class:`DemoFailure`: the job ends failed, its ``on_fail`` runs, the worker lives."""
    raise DemoFailure(str(ctx.payload.get("message") or "demo failure"))


def crash(ctx: JobContext) -> Mapping[str, Any]:
    """Kill the worker process at once, as a native crash would: no exception, no cleanup.

    The job stays ``running`` until a sweep finds it silent; after ``max_attempts`` (3) deaths
    the sweep fails it with 'max attempts exceeded' and the queue goes on.
    """
    log.warning("crash demo: job %s kills worker process %d", ctx.job.id, os.getpid())
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


registry.register(
    JobType(
        "noop",
        noop,
        public=True,
        payload_schema=PydanticSchema(NoopPayload),
        description="Does nothing and succeeds.",
    )
)
registry.register(
    JobType(
        "sleep",
        sleep,
        public=True,
        payload_schema=PydanticSchema(SleepPayload),
        description="Sleeps `seconds`, reporting done/total each second; honours cancellation.",
    )
)
registry.register(
    JobType(
        "fail",
        fail,
        public=True,
        payload_schema=PydanticSchema(FailPayload),
        description="Raises an error with `message`: the job ends failed.",
    )
)
registry.register(
    JobType(
        "crash",
        crash,
        public=True,
        max_attempts=3,
        payload_schema=PydanticSchema(CrashPayload),
        description="Kills its worker process (exit 137); failed after 3 attempts by the sweep.",
    )
)


def crawl_site(ctx: JobContext) -> Mapping[str, Any]:
    """Sleep ``seconds`` as a crawl would take; one at a time per site (docs/flow-control.md)."""
    if ctx.wait_cancelled(float(ctx.payload.get("seconds", 0))):
        ctx.raise_if_cancelled()
    return {"site_id": ctx.payload["site_id"]}


registry.register(
    JobType(
        "crawl_site",
        crawl_site,
        public=True,
        payload_schema=PydanticSchema(CrawlPayload),
        # The Crawl case: one active crawl per site (enqueueing again returns it), whatever
        # key the caller passes, and never two crawls of a site running at once.
        dedup_key="crawl:{site_id}",
        dedup_scope=DedupScope.ACTIVE,
        concurrency_key="site_id",
        concurrency_limit=1,
        description="Crawls `site_id` for `seconds`: one active crawl per site (key crawl:{id}).",
    )
)


def _demo_registry(ctx: ModuleContext) -> Registry:
    return registry


module = Module(
    name="demo",
    build_registry=_demo_registry,
    development=True,
    description="The demo types (JOBS_DEMO_TYPES=1; public over HTTP with JOBS_DEMO_OVER_HTTP).",
)
"""The demo types as a development module (entry point ``demo`` of ``jobs-worker``): loaded
only with the demo types on."""
