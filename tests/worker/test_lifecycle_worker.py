"""Lifecycle on a running worker and the real PostgreSQL store (decision 0025): the on_cancel of
a job the API cancelled while it was queued, with no event for the hook's bookkeeping; a private
checkpoint given back to the next attempt."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from jobs_core import (
    FakeClock,
    Job,
    JobContext,
    JobService,
    JobType,
    Registry,
    RetryPolicy,
    Status,
    constant,
)
from jobs_postgres.store import PostgresJobStore
from jobs_postgres.wakeup import PostgresWakeup
from jobs_worker.worker import Worker
from sqlalchemy import Engine, text

from tests.worker.helpers import FAST, ORG, job_of, running, wait_until


def test_a_worker_runs_on_cancel_for_a_job_cancelled_while_queued(
    pg_url: str, pg_engine: Engine, pg_store: PostgresJobStore
) -> None:
    clock = FakeClock()
    cancelled: list[Job] = []
    seen = threading.Event()

    def on_cancel(job: Job) -> None:
        cancelled.append(job)
        seen.set()

    registry = Registry("test")
    registry.register(JobType("later", lambda ctx: None, on_cancel=on_cancel))
    api = JobService(pg_store, registry, clock)
    job = api.enqueue(ORG, "later", run_at=clock.now().replace(year=2100)).job
    api.cancel(ORG, job.id)  # the API runs no hook; it may crash now
    worker = Worker(JobService(pg_store, registry, clock), PostgresWakeup(pg_url), FAST)
    with running(worker):
        assert seen.wait(10), "the worker ran the hook"
        wait_until(lambda: _due(pg_engine, job) is None, what="the marker cleared")
    assert [(j.id, j.status) for j in cancelled] == [(job.id, Status.CANCELLED)]
    assert job_of(pg_store, job.id).status is Status.CANCELLED
    with pg_engine.connect() as conn:
        kinds = conn.execute(
            text("SELECT kind, to_jsonb(e) FROM job_events e WHERE job_id = :id ORDER BY seq"),
            {"id": job.id},
        ).all()
    assert [kind for kind, _ in kinds] == ["enqueued", "cancelled"]
    for _, logged in kinds:
        assert "hook_due_at" not in logged
        assert "checkpoint" not in logged
        assert "lease" not in logged


def _due(engine: Engine, job: Job) -> object:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT hook_due_at FROM jobs WHERE id = :id"), {"id": job.id}
        ).scalar_one()


class Interrupted(Exception):
    """Declared retryable: the attempt stops half way."""


def test_a_checkpoint_saved_by_one_attempt_is_resumed_by_the_next(
    pg_url: str, pg_store: PostgresJobStore
) -> None:
    resumed: list[Mapping[str, Any] | None] = []

    def crawl(ctx: JobContext) -> Mapping[str, Any]:
        resumed.append(copy.deepcopy(ctx.resume))
        state = copy.deepcopy(dict(ctx.resume or {"frontier": ["/"], "seen": []}))
        page = state["frontier"].pop(0)
        state["seen"].append(page)
        known = state["seen"] + state["frontier"]
        state["frontier"].extend(p for p in ("/a", "/b") if p not in known)
        assert ctx.save_progress(len(state["seen"]), 3, checkpoint=state)
        if ctx.attempt == 1:
            raise Interrupted("killed half way")
        return {"seen": state["seen"]}

    registry = Registry("test")
    retry = RetryPolicy(retry_on=(Interrupted,), backoff=constant(0))
    registry.register(JobType("crawl", crawl, retry=retry))
    service = JobService(pg_store, registry, FakeClock())
    job = service.enqueue(ORG, "crawl").job
    with running(Worker(service, PostgresWakeup(pg_url), FAST)):
        wait_until(lambda: job_of(pg_store, job.id).status is Status.DONE, what="done")
    assert resumed == [None, {"frontier": ["/a", "/b"], "seen": ["/"]}]
    done = job_of(pg_store, job.id)
    assert done.report == {"seen": ["/", "/a"]}
    assert done.progress is not None
    assert done.progress["done"] == 2
    assert "frontier" not in done.progress
