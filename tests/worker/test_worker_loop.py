"""The worker's loop logic, in process, on the in-memory store and a fake clock.

Slots, claims bounded by free slots, batched completions, outcomes, retries with backoff,
timeouts, logs. Cancellation, heartbeats and lease loss, the sweep, outages and shutdown are in
``test_worker_faults.py``; real processes and PostgreSQL in ``test_worker_processes.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from jobs_core import (
    CancelReason,
    FakeClock,
    Job,
    JobContext,
    JobType,
    Registry,
    RetryPolicy,
    Status,
)
from jobs_worker.logs import Event, Events
from jobs_worker.worker import Worker, WorkerConfig

from tests.worker.helpers import (
    FAST,
    ORG,
    Flaky,
    Gate,
    OutageStore,
    build,
    gate_registry,
    job_of,
    noop_registry,
    running,
    status_of,
    wait_until,
)

# -- slots and claims ---------------------------------------------------------------------------


def test_a_worker_drains_the_queue_and_every_job_runs_once() -> None:
    seen: list[int] = []
    lock = threading.Lock()
    registry = Registry("test")

    def record(ctx: JobContext) -> Mapping[str, Any]:
        with lock:
            seen.append(ctx.payload["i"])
        return {"i": ctx.payload["i"]}

    registry.register(JobType("record", record))
    worker, service, store = build(registry, dataclasses.replace(FAST, concurrency=4))
    jobs = service.enqueue_many(ORG, "record", [{"i": i} for i in range(300)])
    with running(worker):
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="drain")
    assert sorted(seen) == list(range(300))
    assert all(job_of(store, j.id).report == {"i": j.payload["i"]} for j in jobs)
    assert worker.stats["completed"] == 300


def _looks_after(worker: Worker, looks: int) -> Callable[[], bool]:
    return lambda: worker.shared.looks > looks


def test_no_more_jobs_are_claimed_than_there_are_slots() -> None:
    gate = Gate()
    worker, service, store = build(gate_registry(gate), dataclasses.replace(FAST, concurrency=3))
    service.enqueue_many(ORG, "gate", [{}] * 10)
    with running(worker):
        wait_until(lambda: gate.running == 3, what="three jobs running")
        # Woken while slots are full (and no handler has ended, so no prefetch), the completer
        # looks again and must not claim more.
        for _ in range(5):
            looked_again = _looks_after(worker, worker.shared.looks)
            worker.shared.wake()
            wait_until(looked_again, what="the completer looked again")
        statuses = [j.status for j in store.jobs]
        assert statuses.count(Status.RUNNING) == 3
        assert statuses.count(Status.QUEUED) == 7
        gate.release.set()
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="drain")
    assert gate.peak == 3


def test_only_registered_types_are_claimed() -> None:
    worker, service, store = build(noop_registry())
    other = Registry("other")
    other.register(JobType("other", lambda ctx: None))
    foreign = service.store.insert(other.new_job(ORG, "other"), service.clock.now())
    assert foreign is not None
    mine = service.enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, mine.id) is Status.DONE, what="noop done")
    assert status_of(store, foreign.id) is Status.QUEUED


def test_async_handlers_run_on_an_attempt_thread_of_their_slot() -> None:
    registry = Registry("test")

    async def nap(ctx: JobContext) -> Mapping[str, Any]:
        await asyncio.sleep(0)
        return {"thread": threading.current_thread().name}

    registry.register(JobType("nap", nap))
    worker, service, store = build(registry, dataclasses.replace(FAST, concurrency=2))
    jobs = service.enqueue_many(ORG, "nap", [{}] * 6)
    with running(worker):
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="drain")
    threads = {job_of(store, j.id).report["thread"] for j in jobs}  # type: ignore[index]
    assert threads <= {"jobs-slot-0", "jobs-slot-1"}


# -- completions --------------------------------------------------------------------------------


def test_completions_that_pile_up_during_a_write_go_in_one_round_trip() -> None:
    store = OutageStore()
    # More slots than the outcomes awaited: the write held at the gate may be a slot's
    # outcome-and-claim, which holds the claim lock (no other claim meanwhile).
    worker, service, _ = build(noop_registry(), dataclasses.replace(FAST, concurrency=30), store)
    store.gate.clear()  # the first write is slow: it waits until the gate opens
    service.enqueue_many(ORG, "noop", [{}] * 40)
    with running(worker):
        wait_until(lambda: len(worker.running_jobs()) >= 20, what="outcomes waiting")
        store.gate.set()
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="drain")
    assert sum(store.batches) == 40
    # The 20 or more outcomes waiting when the gate opened took two round trips (the held one
    # and the next), not one each.
    assert len(store.batches) <= 2 + (40 - 20)


def test_an_uncaught_exception_fails_the_job_calls_on_fail_and_the_worker_lives() -> None:
    failed: list[Job] = []
    registry = noop_registry()

    def boom(ctx: JobContext) -> None:
        raise ValueError("bad row 7\nmore detail")

    registry.register(JobType("boom", boom, on_fail=failed.append))
    worker, service, store = build(registry)
    bad = service.enqueue(ORG, "boom").job
    good = service.enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, good.id) is Status.DONE, what="the next job")
    job = job_of(store, bad.id)
    assert job.status is Status.FAILED
    assert job.error == "ValueError: bad row 7"
    assert job.report is not None
    assert job.report["exception_type"] == "ValueError"
    assert "Traceback" in job.report["traceback"]
    assert [f.id for f in failed] == [bad.id]


def test_a_handler_calling_sys_exit_fails_its_job_not_the_worker() -> None:
    registry = noop_registry()

    def leave(ctx: JobContext) -> None:
        raise SystemExit(3)

    registry.register(JobType("leave", leave))
    worker, service, store = build(registry)
    bad = service.enqueue(ORG, "leave").job
    good = service.enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, good.id) is Status.DONE, what="the next job")
    assert status_of(store, bad.id) is Status.FAILED
    assert job_of(store, bad.id).report == {"exception_type": "SystemExit"}


def test_a_retryable_error_requeues_with_backoff_counted_from_the_attempts_end() -> None:
    clock = FakeClock()
    start = clock.now()
    registry = Registry("test")
    attempts_at: list[tuple[int, float]] = []

    def flaky(ctx: JobContext) -> Mapping[str, Any]:
        attempts_at.append((ctx.attempt, (clock.now() - start).total_seconds()))
        clock.advance(10)  # the attempt takes 10 s of domain time
        if ctx.attempt < 3:
            raise Flaky(f"attempt {ctx.attempt}")
        return {"ok": True}

    registry.register(JobType("flaky", flaky, retry=RetryPolicy(retry_on=(Flaky,))))
    worker, service, store = build(registry, clock=clock)
    job = service.enqueue(ORG, "flaky").job
    with running(worker):
        wait_until(lambda: job_of(store, job.id).status is Status.QUEUED and attempts_at)
        first = job_of(store, job.id)
        assert first.run_at == start + timedelta(seconds=10 + 2)  # 2 s after the attempt ended
        assert first.error == "Flaky: attempt 1"
        clock.advance(2)
        wait_until(lambda: len(attempts_at) == 2, what="second attempt")
        wait_until(lambda: job_of(store, job.id).status is Status.QUEUED)
        second = job_of(store, job.id)
        assert second.run_at == clock.now() + timedelta(seconds=4)  # 4 s: exponential
        clock.advance(4)
        wait_until(lambda: status_of(store, job.id) is Status.DONE, what="third attempt")
    assert [a for a, _ in attempts_at] == [1, 2, 3]
    assert [t for _, t in attempts_at] == [0, 12, 26]
    assert job_of(store, job.id).attempts == 3


def test_a_retryable_error_on_the_last_attempt_fails_the_job() -> None:
    registry = Registry("test")

    def always(ctx: JobContext) -> None:
        raise Flaky("still down")

    registry.register(
        JobType("always", always, max_attempts=1, retry=RetryPolicy(retry_on=(Flaky,)))
    )
    worker, service, store = build(registry)
    job = service.enqueue(ORG, "always").job
    with running(worker):
        wait_until(lambda: status_of(store, job.id) is Status.FAILED)
    assert job_of(store, job.id).error == "Flaky: still down"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_job_running_past_its_types_timeout_fails_as_a_timeout(kind: str) -> None:
    registry = noop_registry()
    stopped = threading.Event()
    reasons: list[CancelReason | None] = []

    def slow(ctx: JobContext) -> None:
        if ctx.wait_cancelled(30):
            reasons.append(ctx.cancel_reason)
            stopped.set()

    async def slow_async(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.set()
            raise

    handler = slow if kind == "sync" else slow_async
    registry.register(JobType("slow", handler, timeout_s=0.2))
    worker, service, store = build(registry)
    job = service.enqueue(ORG, "slow").job
    after = service.enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, after.id) is Status.DONE, what="the next job")
    failed = job_of(store, job.id)
    assert failed.status is Status.FAILED
    assert failed.error == "JobTimeout: timed out after 0.2 s"
    assert stopped.wait(5), "the handler was told to stop"
    if kind == "sync":
        assert reasons == [CancelReason.TIMEOUT]


def test_logs_have_one_structured_line_per_job_at_info_and_its_start_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="jobs.worker")
    worker, service, store = build(noop_registry())
    job = service.enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, job.id) is Status.DONE)
    # The ends of a batch are one record (Events), written one line per job.
    events = [
        (event, r.levelno)
        for r in caplog.records
        for event in (r.msg.events if isinstance(r.msg, Events) else [r.msg])
    ]
    records = [
        (e, level)
        for e, level in events
        if isinstance(e, Event) and e.fields.get("job_id") == job.id
    ]
    assert [(line.name, level) for line, level in records] == [
        ("job.started", logging.DEBUG),
        ("job.finished", logging.INFO),
    ]
    lines = [line for line, _ in records]
    finished = lines[1].fields
    assert finished["type"] == "noop"
    assert finished["org"] == ORG
    assert finished["attempt"] == 1
    assert finished["outcome"] == "done"
    assert isinstance(finished["duration_ms"], float)
    text = str(lines[1])
    assert text.startswith(f"event=job.finished job_id={job.id} type=noop org={ORG} attempt=1 ")


def test_a_worker_runs_once_and_its_config_is_checked() -> None:
    worker, _, _ = build(noop_registry())
    with running(worker):
        pass
    with pytest.raises(RuntimeError):
        worker.run()
    with pytest.raises(ValueError, match="concurrency"):
        WorkerConfig(concurrency=0)
    with pytest.raises(ValueError, match="poll_interval_s"):
        WorkerConfig(poll_interval_s=0)
