"""Small builders shared by the parts of the contract suite (they go through the port itself)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jobs_core import (
    AttemptRef,
    DedupScope,
    FakeClock,
    Job,
    JobContext,
    JobService,
    JobStore,
    JobType,
    Registry,
    RetryPolicy,
    constant,
    domain,
)
from jobs_core.domain import Outcome
from jobs_core.runner import execute


class Flaky(Exception):
    """Declared retryable by the ``flaky`` type."""


def make_registry(failures: list[Job] | None = None) -> Registry:
    """Types covering both dedup scopes, a failing handler and a retryable one."""
    seen = failures if failures is not None else []
    registry = Registry("contract")

    def ok(ctx: JobContext) -> Mapping[str, Any]:
        return {"echo": dict(ctx.payload)}

    def boom(ctx: JobContext) -> None:
        raise ValueError("the handler broke")

    def flaky(ctx: JobContext) -> None:
        raise Flaky("try again later")

    registry.register(JobType("reconcile", ok, dedup_scope=DedupScope.QUEUE, on_fail=seen.append))
    registry.register(JobType("crawl", ok, dedup_scope=DedupScope.ACTIVE, on_fail=seen.append))
    registry.register(JobType("boom", boom, on_fail=seen.append))
    registry.register(
        JobType(
            "flaky",
            flaky,
            max_attempts=3,
            retry=RetryPolicy(retry_on=(Flaky,)),
            on_fail=seen.append,
        )
    )
    registry.register(JobType("history", ok, protected=True, retry=RetryPolicy((), constant(1))))
    return registry


def finish_many(
    store: JobStore, outcomes: Sequence[tuple[AttemptRef, Outcome]], now: datetime
) -> list[Job | None]:
    """Write outcomes through the port's one write: each one's patch
    (:func:`jobs_core.domain.patch`) in one :meth:`JobStore.complete`."""
    patches = [domain.patch(ref, outcome, now) for ref, outcome in outcomes]
    return store.complete(patches).finished


def finish(store: JobStore, ref: AttemptRef, outcome: Outcome, now: datetime) -> Job | None:
    """One outcome written through :meth:`JobStore.complete` (None if the attempt lost it)."""
    [job] = finish_many(store, [(ref, outcome)], now)
    return job


def run_claimed(service: JobService, job: Job, clock: FakeClock) -> Job | None:
    """Execute a claimed job's handler and record its outcome, as a worker slot does."""
    context = JobContext(
        job,
        progress_sink=lambda doc: service.store.save_progress(job.ref, dict(doc), clock.now()),
        now=clock.now,
    )
    outcome = execute(service.registry.get(job.type), context, clock.now())
    return service.complete(job.ref, outcome)


def handler_context(service: JobService, job: Job, clock: FakeClock, **extra: Any) -> JobContext:
    """A claimed job's context as a worker slot builds it for a handler that enqueues children
    (``ctx.enqueue``): the service's registry and enqueuer, progress dropped; ``extra`` for the
    rest (``awaited=service.awaited``, ``admit=...``)."""
    return JobContext(
        job,
        progress_sink=lambda _doc: True,
        now=clock.now,
        registry=service.registry,
        enqueuer=service.enqueue_children,
        **extra,
    )


def claim_one(service: JobService) -> Job:
    """Claim exactly one job (fails the test otherwise)."""
    claimed = service.claim(1)
    assert len(claimed) == 1, f"expected one claimable job, got {claimed}"
    return claimed[0]


def service_for(store: JobStore, clock: FakeClock, failures: list[Job] | None = None) -> JobService:
    """A service over the store under test with the contract registry."""
    return JobService(store, make_registry(failures), clock)
