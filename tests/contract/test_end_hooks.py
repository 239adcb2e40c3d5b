"""End hooks (on_fail, on_cancel) run at least once, on every adapter (decision 0025).

A service stands for each process: ``api`` cancels (it runs no hook), ``worker`` completes
attempts and runs the due hooks of its types. A hook that was taken and not cleared (its worker
died) is taken again after ``HOOK_RETRY_S``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import (
    Cancelled,
    Failed,
    FakeClock,
    Job,
    JobContext,
    JobService,
    JobStore,
    JobType,
    Registry,
    Status,
)
from jobs_core.hooks import HOOK_RETRY_S

ORG = "org-a"


class Hooks:
    """A registry whose types record their hooks' calls."""

    def __init__(self) -> None:
        self.failed: list[Job] = []
        self.cancelled: list[Job] = []
        self.raise_next = 0
        self.registry = Registry("hooks")

        def ok(ctx: JobContext) -> Mapping[str, Any]:
            return {}

        def on_cancel(job: Job) -> None:
            if self.raise_next:
                self.raise_next -= 1
                raise RuntimeError("the module's database is down")
            self.cancelled.append(job)

        self.registry.register(
            JobType("hooked", ok, on_fail=self.failed.append, on_cancel=on_cancel)
        )
        self.registry.register(JobType("plain", ok))


@pytest.fixture
def hooks() -> Hooks:
    return Hooks()


@pytest.fixture
def api(store: JobStore, clock: FakeClock) -> JobService:
    """The API's service: it knows no hook (an empty registry would refuse the enqueue)."""
    registry = Registry("api")
    registry.register(JobType("hooked", lambda ctx: None))
    registry.register(JobType("plain", lambda ctx: None))
    return JobService(store, registry, clock)


@pytest.fixture
def worker(store: JobStore, clock: FakeClock, hooks: Hooks) -> JobService:
    return JobService(store, hooks.registry, clock)


def test_a_job_cancelled_while_queued_gets_its_on_cancel_from_a_worker(
    api: JobService, worker: JobService, hooks: Hooks
) -> None:
    job = api.enqueue(ORG, "hooked", {"n": 1}).job
    api.cancel(ORG, job.id)  # the API process could crash right here: the marker is durable
    assert hooks.cancelled == []
    assert worker.run_end_hooks() == 1
    assert [(j.id, j.status) for j in hooks.cancelled] == [(job.id, Status.CANCELLED)]
    assert worker.run_end_hooks() == 0  # cleared: once per ending
    assert hooks.cancelled[0].payload == {"n": 1}


def test_a_hook_taken_by_a_worker_that_died_runs_again_later(
    api: JobService, worker: JobService, store: JobStore, clock: FakeClock, hooks: Hooks
) -> None:
    job = api.enqueue(ORG, "hooked").job
    api.cancel(ORG, job.id)
    # a worker takes the hook and dies before running it
    [taken] = store.take_end_hooks(["hooked"], 10, clock.now(), clock.now() + _retry())
    assert taken.id == job.id
    assert worker.run_end_hooks() == 0  # not yet: another worker holds it
    clock.advance(HOOK_RETRY_S)
    assert worker.run_end_hooks() == 1
    assert [j.id for j in hooks.cancelled] == [job.id]


def test_a_hook_that_raises_runs_again_after_the_delay(
    api: JobService, worker: JobService, clock: FakeClock, hooks: Hooks
) -> None:
    hooks.raise_next = 1
    job = api.enqueue(ORG, "hooked").job
    api.cancel(ORG, job.id)
    assert worker.run_end_hooks() == 1
    assert hooks.cancelled == []
    clock.advance(HOOK_RETRY_S - 1)
    assert worker.run_end_hooks() == 0
    clock.advance(1)
    assert worker.run_end_hooks() == 1
    assert [j.id for j in hooks.cancelled] == [job.id]


def test_the_worker_that_ends_a_job_runs_its_hook_at_once_and_clears_it(
    worker: JobService, clock: FakeClock, hooks: Hooks
) -> None:
    failing = worker.enqueue(ORG, "hooked").job
    cancelling = worker.enqueue(ORG, "hooked").job
    claimed = {job.id: job for job in worker.claim(2)}
    worker.complete_many(
        [
            (claimed[failing.id].ref, Failed("broke")),
            (claimed[cancelling.id].ref, Cancelled({"reason": "cancellation requested"})),
        ]
    )
    assert [j.id for j in hooks.failed] == [failing.id]
    assert [j.id for j in hooks.cancelled] == [cancelling.id]
    clock.advance(HOOK_RETRY_S * 2)
    assert worker.run_end_hooks() == 0  # nothing left due: no second run


def test_a_worker_takes_only_the_hooks_of_its_types_and_settles_hookless_ones(
    api: JobService, worker: JobService, store: JobStore, clock: FakeClock, hooks: Hooks
) -> None:
    plain = api.enqueue(ORG, "plain").job
    api.cancel(ORG, plain.id)
    other = Registry("other")
    other.register(JobType("unknown_here", lambda ctx: None))
    foreign = JobService(store, other, clock).enqueue(ORG, "unknown_here").job
    api_other = JobService(store, other, clock)
    api_other.cancel(ORG, foreign.id)
    assert worker.run_end_hooks() == 1  # the plain job's marker, cleared without a hook
    assert worker.run_end_hooks() == 0
    # the other type's hook waits for a worker that registers it
    assert [j.id for j in store.take_end_hooks(["unknown_here"], 10, clock.now(), clock.now())] == [
        foreign.id
    ]


def test_a_retry_clears_a_pending_hook_and_a_later_ending_is_not_cleared_by_an_old_run(
    api: JobService, worker: JobService, store: JobStore, clock: FakeClock, hooks: Hooks
) -> None:
    job = api.enqueue(ORG, "hooked").job
    api.cancel(ORG, job.id)
    api.retry(ORG, job.id)
    assert worker.run_end_hooks() == 0  # the job is queued again: no hook of the old ending
    clock.advance(1)
    api.cancel(ORG, job.id)
    [first] = store.take_end_hooks(["hooked"], 10, clock.now(), clock.now() + _retry())
    api.retry(ORG, job.id)
    clock.advance(1)
    api.cancel(ORG, job.id)  # a second ending while the first hook was being run
    store.end_hooks_done([first])  # the old run settles its own ending only
    assert worker.run_end_hooks() == 1
    assert [j.finished_at for j in hooks.cancelled] == [clock.now()]


def test_a_sweep_that_cancels_or_fails_a_zombie_runs_its_hook(
    api: JobService, worker: JobService, clock: FakeClock, hooks: Hooks
) -> None:
    job = worker.enqueue(ORG, "hooked").job
    worker.claim(1)
    api.cancel(ORG, job.id)  # requested while running; the worker dies
    clock.advance(601)
    report = worker.sweep(600)
    assert [j.id for j in report.cancelled] == [job.id]
    assert [j.id for j in hooks.cancelled] == [job.id]
    clock.advance(HOOK_RETRY_S * 2)
    assert worker.run_end_hooks() == 0


def _retry() -> Any:
    from datetime import timedelta

    return timedelta(seconds=HOOK_RETRY_S)
