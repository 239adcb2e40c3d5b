"""The job types the API tests serve, and small helpers that play the worker's part."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobs_core import (
    DedupScope,
    Job,
    JobContext,
    JobService,
    JobType,
    Outcome,
    Registry,
)
from jobs_worker.schemas import PydanticSchema
from pydantic import BaseModel, ConfigDict, Field


class Greeting(BaseModel):
    """The payload of the ``greet`` type."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    times: int = Field(default=1, ge=1, le=10)


class Site(BaseModel):
    """The payload of the ``crawl`` type."""

    site_id: int = Field(ge=1)


class ModelSchema(PydanticSchema):
    """A :class:`~jobs_core.PayloadSchema` over a pydantic model (what a module would write):
    the deployables' own adapter."""


class BrokenSchema:
    """A module bug: its validation raises something that is not a jobs error."""

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Always fails unexpectedly, with internals in the message."""
        raise RuntimeError("secret internals: password=hunter2")

    def json_schema(self) -> dict[str, Any]:
        """Any object."""
        return {"type": "object"}


def _ok(ctx: JobContext) -> Mapping[str, Any]:
    return {"echo": dict(ctx.payload)}


def make_registry() -> Registry:
    """Public types of each kind the routes treat differently, and one internal type."""
    registry = Registry("api-tests")
    registry.register(JobType("noop", _ok, public=True))
    registry.register(JobType("greet", _ok, public=True, payload_schema=ModelSchema(Greeting)))
    registry.register(JobType("exclusive", _ok, public=True, dedup_scope=DedupScope.ACTIVE))
    registry.register(JobType("history", _ok, public=True, protected=True))
    registry.register(JobType("internal", _ok))
    registry.register(
        JobType(
            "crawl",
            _ok,
            public=True,
            payload_schema=ModelSchema(Site),
            dedup_key="crawl:{site_id}",
            dedup_scope=DedupScope.ACTIVE,
            concurrency_key="site_id",
            concurrency_limit=1,
        )
    )
    # internal: one start per site per hour (a rate limit, decision 0042)
    registry.register(JobType("polite", _ok, concurrency_key="site_id", rate_limit=(1, 3600)))
    return registry


def claim(service: JobService, job_id: str) -> Job:
    """Claim the queued jobs, as a worker would, and return the one with ``job_id``."""
    claimed = {str(job.id): job for job in service.claim(1000)}
    assert job_id in claimed, f"job {job_id} was not claimable"
    return claimed[job_id]


def finish(service: JobService, job_id: str, outcome: Outcome) -> Job:
    """Claim the job and record ``outcome`` for its attempt."""
    finished = service.complete(claim(service, job_id).ref, outcome)
    assert finished is not None
    return finished


registry = make_registry()
"""The registry a real API process serves in the HTTP tests (``--registry``)."""


broken_registry = Registry("broken")
"""A public type whose payload schema raises an unexpected error: a 500 on a real server."""
broken_registry.register(JobType("broken", _ok, public=True, payload_schema=BrokenSchema()))


def _parse_settings(ctx: JobContext) -> Mapping[str, Any]:
    def parse(text: str) -> Any:
        return json.loads(text)  # a library call that fails: its frames are the handler's too

    return {"settings": parse("{not json")}


failing_registry = Registry("failing")
"""A public type whose handler fails in a library it calls: its traceback as tenants see it."""
failing_registry.register(JobType("explode", _parse_settings, public=True, max_attempts=1))
