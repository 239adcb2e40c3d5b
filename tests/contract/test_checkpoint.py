"""The private checkpoint, on every adapter (decision 0025): written with the progress in one
write, fenced by the lease, given back to a later attempt, never returned with a job."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import (
    DocumentTooLarge,
    FakeClock,
    Job,
    JobContext,
    JobFilter,
    JobService,
    JobStore,
    JobType,
    Registry,
    Requeue,
)
from jobs_core.limits import CHECKPOINT_MAX_BYTES
from jobs_core.runner import execute

ORG = "org-a"
SECRET = "https://private.example/frontier-only"


def context_for(service: JobService, job: Job, clock: FakeClock) -> JobContext:
    """The context a worker builds, on the store under test."""
    store = service.store

    def sink(document: Mapping[str, Any], checkpoint: Mapping[str, Any] | None = None) -> bool:
        return store.save_progress(job.ref, dict(document), clock.now(), checkpoint)

    return JobContext(
        job,
        progress_sink=sink,
        now=clock.now,
        checkpoint_sink=sink,
        checkpoint_loader=lambda: store.checkpoint_of(job.id),
    )


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    registry = Registry("checkpoint")
    registry.register(JobType("crawl", lambda ctx: None))
    return JobService(store, registry, clock)


def test_a_checkpoint_is_saved_with_the_progress_and_given_back_to_the_next_attempt(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl").job
    [first] = service.claim(1)
    ctx = context_for(service, first, clock)
    assert ctx.resume is None
    assert ctx.save_progress(3, 10, checkpoint={"frontier": [SECRET], "seen": 3}, stage="fetch")
    assert ctx.resume == {"frontier": [SECRET], "seen": 3}
    public = service.get(ORG, job.id)
    assert public.progress is not None
    assert public.progress["done"] == 3
    assert public.progress["stage"] == "fetch"
    assert SECRET not in repr(public)
    service.complete(first.ref, Requeue(run_at=clock.now(), error="crashed"))
    [second] = service.claim(1)
    assert second.attempts == 2
    again = context_for(service, second, clock)
    assert again.resume == {"frontier": [SECRET], "seen": 3}
    assert again.checkpoint is not None  # the public progress at claim, as before
    assert SECRET not in repr(again.checkpoint)


def test_no_read_of_the_org_returns_the_checkpoint(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl").job
    [running] = service.claim(1)
    assert context_for(service, running, clock).save_progress(checkpoint={"s": SECRET})
    listed = store.list_jobs(ORG, JobFilter())
    got = store.get(ORG, job.id)
    assert got is not None
    assert SECRET not in repr(listed)
    assert SECRET not in repr(got)
    assert store.checkpoint_of(job.id) == {"s": SECRET}


def test_a_stale_attempt_cannot_write_a_checkpoint(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl").job
    [first] = service.claim(1)
    ctx = context_for(service, first, clock)
    assert ctx.save_progress(checkpoint={"n": 1})
    clock.advance(601)
    service.sweep(600)
    [second] = service.claim(1)
    assert not ctx.save_progress(checkpoint={"n": 99})  # the old lease: refused
    assert ctx.cancelled
    assert store.checkpoint_of(job.id) == {"n": 1}
    assert context_for(service, second, clock).save_progress(checkpoint={"n": 2})
    assert store.checkpoint_of(job.id) == {"n": 2}


def test_a_report_progress_leaves_the_checkpoint_alone_and_a_retry_keeps_it(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl").job
    [running] = service.claim(1)
    ctx = context_for(service, running, clock)
    assert ctx.save_progress(1, 2, checkpoint={"n": 1})
    assert ctx.report_progress(2, 2, force=True)
    assert store.checkpoint_of(job.id) == {"n": 1}

    def boom(ctx: JobContext) -> None:
        raise ValueError("broke")

    outcome = execute(JobType("crawl", boom), ctx, clock.now())
    service.complete(running.ref, outcome)
    service.retry(ORG, job.id)
    [retried] = service.claim(1)
    assert context_for(service, retried, clock).resume == {"n": 1}


def test_a_checkpoint_over_the_limit_is_refused_before_any_write(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "crawl").job
    [running] = service.claim(1)
    ctx = context_for(service, running, clock)
    with pytest.raises(DocumentTooLarge, match="checkpoint over"):
        ctx.save_progress(checkpoint={"blob": "x" * (CHECKPOINT_MAX_BYTES + 1)})
    assert store.checkpoint_of(job.id) is None
