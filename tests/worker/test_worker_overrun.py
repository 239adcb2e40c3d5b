"""Timeouts that hold and the lease fence, in process (issue 11, findings 1 and 4).

- a handler past its timeout is failed at the timeout, but its slot stays busy until its code
  really stops (two such threads used to run beside new jobs: hidden oversubscription);
- past ``timeout_grace_s`` the worker stops claiming, hands its other jobs back and ``run()``
  returns ``EXIT_WEDGED`` for the supervisor to start a fresh process;
- a worker whose heartbeats fail cancels its handlers before the sweep threshold, stops
  claiming, hands the job back when the store answers again, and claims again.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import JobContext, JobType, Registry, Status
from jobs_worker.worker import EXIT_FENCED, EXIT_WEDGED, WorkerConfig

from tests.worker.helpers import FAST, ORG, OutageStore, build, job_of, status_of, wait_until


def _registry(release: threading.Event, kind: str = "sync") -> Registry:
    registry = Registry("overrun-tests")

    def stubborn(ctx: JobContext) -> None:
        release.wait(60)  # ignores its cancellation

    async def blocking(ctx: JobContext) -> None:
        release.wait(60)  # never awaits: blocks its event loop

    def cooperative(ctx: JobContext) -> Mapping[str, Any]:
        ctx.wait_cancelled(60)
        ctx.raise_if_cancelled()
        return {}

    registry.register(JobType("stubborn", blocking if kind == "async" else stubborn, timeout_s=0.2))
    registry.register(JobType("cooperative", cooperative))
    registry.register(JobType("noop", lambda ctx: None))
    return registry


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_overrunning_handler_fails_at_its_timeout_and_keeps_its_slot_busy(kind: str) -> None:
    release = threading.Event()
    config = dataclasses.replace(FAST, concurrency=1, timeout_grace_s=60)
    worker, service, store = build(_registry(release, kind), config)
    slow = service.enqueue(ORG, "stubborn").job
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: status_of(store, slow.id) is Status.FAILED, 10, "the timeout")
        failed = job_of(store, slow.id)
        assert failed.error is not None
        assert failed.error.startswith("JobTimeout: timed out after 0.2 s")
        # The handler's code still runs: its slot is busy, a job enqueued now waits.
        behind = service.enqueue(ORG, "noop").job
        for _ in range(20):
            assert status_of(store, behind.id) is Status.QUEUED
            assert worker.shared.executing == 1
            time.sleep(0.01)
        release.set()
        wait_until(lambda: status_of(store, behind.id) is Status.DONE, 10, "the job behind")
    finally:
        release.set()
        worker.stop()
        thread.join(15)
    assert codes == [0]


def test_past_the_grace_the_worker_hands_back_its_other_jobs_and_exits_wedged() -> None:
    release = threading.Event()
    config = dataclasses.replace(FAST, concurrency=2, timeout_grace_s=0.5)
    worker, service, store = build(_registry(release), config)
    other = service.enqueue(ORG, "cooperative").job
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: status_of(store, other.id) is Status.RUNNING, 10, "the other job")
        slow = service.enqueue(ORG, "stubborn").job
        thread.join(20)
        assert not thread.is_alive(), "the wedged worker did not stop"
        assert codes == [EXIT_WEDGED]
        assert status_of(store, slow.id) is Status.FAILED
        handed_back = job_of(store, other.id)
        assert handed_back.status is Status.QUEUED
        assert handed_back.attempts == 0  # refunded: not the job's fault
    finally:
        release.set()


def test_a_worker_that_cannot_beat_fences_its_handler_before_the_threshold_and_recovers() -> None:
    """Heartbeats fail (the store is down for the worker): at ``threshold - margin`` after the
    last proof the handler is cancelled, nothing is claimed while the store stays silent, and
    when it answers again the job goes back to the queue (attempt refunded) and runs again."""
    release = threading.Event()
    store = OutageStore()
    config = WorkerConfig(
        concurrency=1,
        heartbeat_s=0.1,
        sweep_interval_s=60,
        sweep_threshold_s=1.5,
        lease_margin_s=0.5,
        poll_interval_s=0.05,
        cancel_check_s=0.05,
        backoff_initial_s=0.01,
        backoff_cap_s=0.05,
    )
    runs: list[float] = []
    registry = Registry("fence-tests")

    def tracked(ctx: JobContext) -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            ctx.wait_cancelled(60)
            ctx.raise_if_cancelled()

    registry.register(JobType("tracked", tracked))
    worker, service, _ = build(registry, config, store=store)
    job = service.enqueue(ORG, "tracked").job
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: runs, 10, "the job to start")
        store.down.set()
        down_at = time.monotonic()
        wait_until(lambda: worker.fence.fenced_total == 1, 10, "the fence")
        fenced_after = time.monotonic() - down_at
        assert fenced_after < config.sweep_threshold_s  # before anyone may take the job
        assert not worker.fence.claiming_allowed
        assert len(runs) == 1
        store.down.clear()
        wait_until(lambda: len(runs) == 2, 10, "the job to run again")
        wait_until(lambda: status_of(store, job.id) is Status.DONE, 10)
        assert worker.fence.claiming_allowed
        assert job_of(store, job.id).attempts == 1  # the fenced attempt was refunded
    finally:
        release.set()
        worker.stop()
        thread.join(15)
    assert codes == [0]


def test_a_fenced_handler_that_will_not_stop_ends_the_process() -> None:
    release = threading.Event()
    store = OutageStore()
    config = WorkerConfig(
        concurrency=1,
        heartbeat_s=0.1,
        sweep_threshold_s=1.5,
        lease_margin_s=0.5,
        poll_interval_s=0.05,
        backoff_initial_s=0.01,
        backoff_cap_s=0.05,
    )
    registry = Registry("fence-tests")

    def deaf(ctx: JobContext) -> None:
        release.wait(60)  # never looks at its cancellation

    registry.register(JobType("deaf", deaf))
    worker, service, _ = build(registry, config, store=store)
    exits: list[int] = []
    worker.hard_exit = exits.append  # os._exit in a real process
    service.enqueue(ORG, "deaf")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(worker.running_jobs, 10, "the job to start")
        store.down.set()
        down_at = time.monotonic()
        wait_until(lambda: exits, 10, "the hard exit")
        assert exits[0] == EXIT_FENCED
        assert time.monotonic() - down_at < config.sweep_threshold_s
    finally:
        release.set()
        store.down.clear()
        worker.stop(graceful=False)
        thread.join(15)


def test_lease_timing_that_cannot_hold_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="lease_margin_s"):
        WorkerConfig(heartbeat_s=10, sweep_threshold_s=30, lease_margin_s=25)
    from jobs_worker.settings import WorkerSettings

    with pytest.raises(ValueError, match="JOBS_LEASE_MARGIN_S"):
        WorkerSettings(heartbeat_s=10, sweep_threshold_s=30, lease_margin_s=25)
    settings = WorkerSettings(sweep_threshold_s=30, heartbeat_s=30)
    assert settings.effective_lease_margin_s == 6
    assert settings.effective_store_timeout_s == 10
    assert (
        settings.effective_heartbeat_s
        + settings.effective_store_timeout_s
        + settings.effective_lease_margin_s
        <= settings.sweep_threshold_s
    )
