"""The worker's loop under faults, in process, on the in-memory store and a fake clock:
cancellation, heartbeats and lease loss, the sweep, outages, shutdown (the rest of the loop is in
``test_worker_loop.py``; real processes and PostgreSQL in ``test_worker_processes.py``)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import (
    CancelReason,
    FakeClock,
    Job,
    JobContext,
    JobType,
    Registry,
    Status,
    domain,
)
from jobs_core.domain import parse_heartbeat
from jobs_worker.logs import Event
from jobs_worker.worker import is_outage

from tests.worker.helpers import (
    FAST,
    ORG,
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

# -- cancellation, heartbeats, lease loss, sweep ------------------------------------------------


def test_a_running_job_sees_its_cancellation_and_ends_cancelled() -> None:
    gate = Gate()
    worker, service, store = build(gate_registry(gate))
    job = service.enqueue(ORG, "gate").job
    with running(worker):
        wait_until(lambda: gate.running == 1, what="job running")
        service.cancel(ORG, job.id)
        wait_until(lambda: status_of(store, job.id) is Status.CANCELLED, what="cancelled")
    cancelled = job_of(store, job.id)
    assert cancelled.error == "cancelled"
    assert cancelled.report == {"reason": "cancellation requested"}
    assert gate.contexts[0].cancel_reason is CancelReason.REQUESTED
    assert gate.contexts[0].cancel_message == "cancellation requested"


def test_the_heartbeat_keeps_a_long_job_from_being_swept() -> None:
    clock = FakeClock()
    gate = Gate()
    config = dataclasses.replace(FAST, heartbeat_s=0.02, sweep_threshold_s=600)
    worker, service, store = build(gate_registry(gate), config, clock=clock)
    job = service.enqueue(ORG, "gate").job
    with running(worker):
        wait_until(lambda: gate.running == 1, what="job running")
        clock.advance(3600)  # an hour of domain time: the job would be a zombie without beats
        wait_until(
            lambda: parse_heartbeat(job_of(store, job.id).progress) == clock.now(),
            what="a heartbeat at the new time",
        )
        report = service.sweep(600)
        assert report.requeued == report.failed == []
        gate.release.set()
        wait_until(lambda: status_of(store, job.id) is Status.DONE)
    assert job_of(store, job.id).attempts == 1


def test_a_worker_whose_job_was_swept_and_reclaimed_stops_and_cannot_overwrite_it() -> None:
    clock = FakeClock()
    gate = Gate()
    worker, service, store = build(gate_registry(gate), clock=clock)
    job = service.enqueue(ORG, "gate").job
    with running(worker):
        wait_until(lambda: gate.running == 1, what="job running")
        clock.advance(601)
        assert [j.id for j in service.sweep(600).requeued] == [job.id]
        [second] = service.claim(1)  # another worker takes it: attempt 2, a new lease
        assert worker.heartbeat() == set()
        ctx = gate.contexts[0]
        assert ctx.cancelled
        assert ctx.cancel_reason is CancelReason.LEASE_LOST
        assert ctx.cancel_message.startswith("lease lost")
        wait_until(lambda: worker.stats["lost"] == 1, what="the stale outcome refused")
    now = job_of(store, job.id)
    assert now.status is Status.RUNNING
    assert now.lease == second.lease
    assert now.attempts == 2


def test_the_sweep_at_start_requeues_a_zombie_which_then_runs() -> None:
    clock = FakeClock()
    worker, service, store = build(noop_registry(), clock=clock)
    job = service.enqueue(ORG, "noop").job
    [claimed] = service.claim(1)  # a worker that died right after its claim
    clock.advance(601)
    with running(worker):
        wait_until(lambda: status_of(store, job.id) is Status.DONE, what="re-run")
    assert job_of(store, job.id).attempts == 2
    assert claimed.attempts == 1


def test_a_worker_never_sweeps_its_own_jobs_after_an_outage_longer_than_the_threshold() -> None:
    clock = FakeClock()
    store = OutageStore()
    gate = Gate()
    worker, service, _ = build(gate_registry(gate), store=store, clock=clock)
    job = service.enqueue(ORG, "gate").job
    with running(worker):
        wait_until(lambda: gate.running == 1, what="job running")
        store.gate.clear()  # its outcome will wait, as it would for a database coming back
        clock.advance(601)  # no heartbeat got through for longer than the threshold
        gate.release.set()
        wait_until(lambda: worker.stats["claimed"] == 1 and gate.running == 0)
        assert worker.sweep() == 0
        store.gate.set()
        wait_until(lambda: status_of(store, job.id) is Status.DONE, what="outcome written")
    assert job_of(store, job.id).attempts == 1


def test_a_zombie_at_max_attempts_fails_and_the_queue_goes_on() -> None:
    clock = FakeClock()
    failed: list[Job] = []
    registry = Registry("test")
    registry.register(JobType("noop", lambda ctx: None, max_attempts=1, on_fail=failed.append))
    worker, service, store = build(registry, clock=clock)
    zombie = service.enqueue(ORG, "noop").job
    service.claim(1)
    clock.advance(601)
    after = service.enqueue(ORG, "noop").job
    with running(worker):
        wait_until(lambda: status_of(store, after.id) is Status.DONE, what="the next job")
    assert job_of(store, zombie.id).error == domain.MAX_ATTEMPTS_EXCEEDED
    assert [j.id for j in failed] == [zombie.id]


# -- outages ------------------------------------------------------------------------------------


def test_an_outage_is_survived_and_no_outcome_is_lost(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobs.worker")
    store = OutageStore()
    gate = Gate()
    worker, service, _ = build(gate_registry(gate), store=store)
    first = service.enqueue(ORG, "gate").job
    with running(worker):
        wait_until(lambda: gate.running == 1, what="job running")
        store.down.set()
        gate.release.set()  # the handler returns while the database is away
        wait_until(lambda: store.failed_calls >= 10, what="retries during the outage")
        assert status_of(store, first.id) is Status.RUNNING
        later = service.enqueue(ORG, "noop").job
        store.down.clear()
        wait_until(lambda: status_of(store, first.id) is Status.DONE, what="outcome written")
        wait_until(lambda: status_of(store, later.id) is Status.DONE, what="later job")
    events = [r.msg.name for r in caplog.records if isinstance(r.msg, Event)]
    assert "store.unavailable" in events
    assert "store.recovered" in events


def test_progress_lost_to_an_outage_does_not_fail_the_job() -> None:
    store = OutageStore()
    registry = Registry("test")
    reported = threading.Event()

    def steps(ctx: JobContext) -> Mapping[str, Any]:
        store.down.set()
        written = ctx.report_progress(done=1, total=2, force=True)
        store.down.clear()
        # Not throttled by the write that did not happen: the next report goes through.
        again = ctx.report_progress(done=1, total=2)
        reported.set()
        return {"written": written, "again": again, "cancelled": ctx.cancelled}

    registry.register(JobType("steps", steps))
    worker, service, _ = build(registry, store=store)
    job = service.enqueue(ORG, "steps").job
    with running(worker):
        wait_until(lambda: status_of(store, job.id) is Status.DONE)
    # The write lost to the outage is reported as not written (a durable checkpoint written
    # with force=True must not be believed saved), and the handler is not cancelled for it.
    assert job_of(store, job.id).report == {"written": False, "again": True, "cancelled": False}


def test_outage_errors_are_recognised_through_their_causes() -> None:
    from jobs_core import StoreUnavailable

    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = ConnectionResetError("reset by peer")
    assert is_outage(wrapped)
    assert is_outage(StoreUnavailable())
    assert not is_outage(ValueError("a bug"))
    during = ValueError("a bug while handling an outage")
    during.__context__ = StoreUnavailable()
    assert not is_outage(during)


# -- shutdown -----------------------------------------------------------------------------------


def test_a_graceful_stop_lets_the_running_job_finish_and_claims_nothing_more() -> None:
    gate = Gate()
    worker, service, store = build(gate_registry(gate))
    first = service.enqueue(ORG, "gate").job
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()))
    thread.start()
    wait_until(lambda: gate.running == 1, what="job running")
    second = service.enqueue(ORG, "noop").job
    worker.stop()
    thread.join(0.3)
    assert thread.is_alive(), "the worker waits for its running job"
    gate.release.set()
    thread.join(10)
    assert codes == [0]
    assert status_of(store, first.id) is Status.DONE
    assert status_of(store, second.id) is Status.QUEUED


@pytest.mark.parametrize("how", ["second stop", "grace elapsed"])
def test_a_forced_stop_hands_the_running_job_back_without_using_its_attempt(how: str) -> None:
    gate = Gate()
    config = dataclasses.replace(FAST, shutdown_grace_s=0.2 if how == "grace elapsed" else 30)
    worker, service, store = build(gate_registry(gate), config)
    job = service.enqueue(ORG, "gate").job
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()))
    thread.start()
    wait_until(lambda: gate.running == 1, what="job running")
    worker.stop()
    if how == "second stop":
        worker.stop(graceful=False)
    thread.join(10)
    assert codes == [0]
    handed_back = job_of(store, job.id)
    assert handed_back.status is Status.QUEUED
    assert handed_back.attempts == 0  # the interrupted attempt is refunded
    assert handed_back.lease is None
    ctx = gate.contexts[0]
    assert ctx.cancelled
    assert ctx.cancel_reason is CancelReason.SHUTDOWN
    assert ctx.cancel_message == "the worker shut down before the job finished"
    # Another worker takes it up as a first attempt.
    _, again, _ = build(gate_registry(Gate()), store=store)
    [reclaimed] = again.claim(1)
    assert reclaimed.attempts == 1


def test_a_forced_stop_ends_a_job_whose_cancellation_was_requested_as_cancelled() -> None:
    registry = Registry("test")
    started = threading.Event()

    def stubborn(ctx: JobContext) -> None:
        started.set()
        ctx.wait_cancelled(30)  # then ignores the request and keeps going a little
        ctx.wait_cancelled(30)

    registry.register(JobType("stubborn", stubborn))
    config = dataclasses.replace(FAST, cancel_check_s=60)  # the monitor never sees the request
    worker, service, store = build(registry, config)
    job = service.enqueue(ORG, "stubborn").job
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()))
    thread.start()
    assert started.wait(10)
    service.cancel(ORG, job.id)
    worker.stop(graceful=False)
    thread.join(10)
    assert codes == [0]
    assert status_of(store, job.id) is Status.CANCELLED
