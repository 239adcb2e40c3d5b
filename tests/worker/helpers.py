"""Helpers of the worker tests: a worker running on a thread, bounded waits, an outage switch."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from jobs_core import (
    AttemptRef,
    FakeClock,
    InMemoryJobStore,
    InMemoryWakeup,
    Job,
    JobContext,
    JobService,
    JobStore,
    JobType,
    Registry,
    Status,
    StoreUnavailable,
)
from jobs_core.domain import Patch
from jobs_core.flow import ClaimLimits, FairTurn
from jobs_core.ports import ClaimNext, Completed
from jobs_worker.worker import Worker, WorkerConfig

ORG = "org-1"

FAST = WorkerConfig(
    concurrency=1,
    heartbeat_s=60.0,
    sweep_interval_s=60.0,
    sweep_threshold_s=600.0,
    poll_interval_s=0.05,
    cancel_check_s=0.05,
    shutdown_grace_s=10.0,
    backoff_initial_s=0.01,
    backoff_cap_s=0.05,
)
"""Short real-time pacing so the loops react at once; domain time is a FakeClock's."""


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Wait for a real event (bounded): poll ``predicate`` until it is truthy."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(0.005)


class OutageStore(InMemoryJobStore):
    """The in-memory store with an outage switch: while ``down`` is set, every worker-side call
    raises :class:`StoreUnavailable`, as the PostgreSQL adapter does when its server is gone.
    ``batches`` records the size of every ``complete`` (a batch of outcomes) that went
    through; ``gate``, when cleared, holds the next of those until it is set (a slow round
    trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.batches: list[int] = []
        self.failed_calls = 0

    def _check(self) -> None:
        if self.down.is_set():
            self.failed_calls += 1
            raise StoreUnavailable("connection refused (test outage)")

    def claim(
        self,
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: ClaimLimits | None = None,
        turn: FairTurn | None = None,
    ) -> list[Job]:
        self._check()
        return super().claim(limit, now, types, limits=limits, turn=turn)

    def heartbeat(self, refs: Sequence[AttemptRef], now: datetime) -> set[uuid.UUID]:
        self._check()
        return super().heartbeat(refs, now)

    def cancel_requested(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        self._check()
        return super().cancel_requested(refs)

    def save_progress(
        self,
        ref: AttemptRef,
        progress: dict[str, Any],
        now: datetime,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool:
        self._check()
        return super().save_progress(ref, progress, now, checkpoint)

    def find_stale(self, stale_before: datetime, limit: int) -> list[Job]:
        self._check()
        return super().find_stale(stale_before, limit)

    def complete(
        self, patches: Sequence[Patch], *, claim_next: ClaimNext | None = None
    ) -> Completed:
        self.gate.wait(10)
        self._check()
        self.batches.append(len(patches))
        return super().complete(patches, claim_next=claim_next)


def build(
    registry: Registry,
    config: WorkerConfig = FAST,
    store: InMemoryJobStore | None = None,
    clock: FakeClock | None = None,
) -> tuple[Worker, JobService, InMemoryJobStore]:
    """A worker over an in-memory store and a fake clock; not started."""
    store = store if store is not None else InMemoryJobStore()
    service = JobService(store, registry, clock or FakeClock())
    return Worker(service, InMemoryWakeup(store), config), service, store


@contextmanager
def running(worker: Worker, graceful_stop: bool = True) -> Iterator[Worker]:
    """Run ``worker`` on a thread for the block; stop it after and check it exits with 0."""
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop(graceful=graceful_stop)
        thread.join(15)
        assert not thread.is_alive(), "the worker did not stop"
    assert codes == [0]


def job_of(store: JobStore, job_id: uuid.UUID, org: str = ORG) -> Job:
    """The job as the store has it now."""
    job = store.get(org, job_id)
    assert job is not None
    return job


def status_of(store: JobStore, job_id: uuid.UUID, org: str = ORG) -> Status:
    """The job's status now."""
    return job_of(store, job_id, org).status


class Flaky(Exception):
    """A declared-retryable error."""


def noop_registry() -> Registry:
    registry = Registry("test")
    registry.register(JobType("noop", lambda ctx: None))
    return registry


class Gate:
    """A handler that blocks until released (or cancelled) and counts how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.contexts: list[JobContext] = []

    def __call__(self, ctx: JobContext) -> Mapping[str, Any]:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.contexts.append(ctx)
        try:
            while not self.release.wait(0.01):
                ctx.raise_if_cancelled()
            return {"attempt": ctx.attempt}
        finally:
            with self.lock:
                self.running -= 1


def gate_registry(gate: Gate, **declarations: Any) -> Registry:
    registry = noop_registry()
    registry.register(JobType("gate", gate, **declarations))
    return registry
