"""The prefetch (docs/worker.md, "Prefetch"; decision 0028): how many jobs a claim asks for, and a
prefetched job's life until a slot takes it (cancelled, handed back, never run twice)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import datetime

import pytest
from jobs_core import InMemoryJobStore, Job, JobContext, JobService, JobType, Registry, Status
from jobs_core.domain import Patch
from jobs_core.flow import ClaimLimits, FairTurn
from jobs_core.ports import ClaimNext, Completed
from jobs_worker.worker.claiming import Demand

from tests.worker.helpers import FAST, ORG, build, job_of, running, wait_until


class RecordingStore(InMemoryJobStore):
    """The in-memory store, recording the size of every claim asked for (alone, or with the
    outcomes of the completer's round)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def claim(
        self,
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: ClaimLimits | None = None,
        turn: FairTurn | None = None,
    ) -> list[Job]:
        self.asked.append(limit)
        return super().claim(limit, now, types, limits=limits, turn=turn)

    def complete(
        self, patches: Sequence[Patch], *, claim_next: ClaimNext | None = None
    ) -> Completed:
        if claim_next is not None:
            self.asked.append(claim_next.limit)
        return super().complete(patches, claim_next=claim_next)


# -- the size of a claim ------------------------------------------------------------------------


def test_no_prefetch_before_a_handler_has_ended() -> None:
    demand = Demand(concurrency=4, prefetch=100, window_s=0.05)
    assert demand.prefetch() == 0
    assert demand.wanted(inflight=0) == 4
    assert demand.wanted(inflight=3) == 1
    assert demand.wanted(inflight=9) == 0


def test_the_prefetch_is_what_the_slots_start_within_the_window() -> None:
    demand = Demand(concurrency=2, prefetch=100, window_s=0.05)
    demand.observe(0.01)  # 10 ms jobs on 2 slots: 10 of them start within 50 ms
    assert demand.prefetch() == 10
    assert demand.wanted(inflight=2) == 10
    demand.observe(10.0)  # a long job pulls the average up: no prefetch any more
    assert demand.mean_s is not None
    assert demand.mean_s > 1
    assert demand.prefetch() == 0


def test_the_prefetch_is_capped_and_can_be_turned_off() -> None:
    capped = Demand(concurrency=1, prefetch=7, window_s=0.05)
    capped.observe(0.0)
    assert capped.prefetch() == 7
    off = Demand(concurrency=1, prefetch=0, window_s=0.05)
    off.observe(0.0)
    assert off.prefetch() == 0
    assert off.wanted(inflight=0) == 1


def test_short_jobs_are_claimed_ahead_of_the_slots_and_each_runs_once() -> None:
    ran: list[int] = []
    lock = threading.Lock()
    registry = Registry("test")

    def record(ctx: JobContext) -> None:
        with lock:
            ran.append(ctx.payload["i"])

    registry.register(JobType("record", record))
    store = RecordingStore()
    worker, service, _ = build(registry, dataclasses.replace(FAST, prefetch=50), store)
    service.enqueue_many(ORG, "record", [{"i": i} for i in range(400)])
    with running(worker):
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="drain")
    assert sorted(ran) == list(range(400))
    assert store.asked[0] == 1  # nothing known of the handlers yet: the free slot only
    assert max(store.asked) > 1  # then claims ahead of the one slot
    assert max(store.asked) <= 1 + 50


def test_without_prefetch_a_claim_never_asks_for_more_than_the_free_slots() -> None:
    registry = Registry("test")
    registry.register(JobType("noop", lambda ctx: None))
    store = RecordingStore()
    config = dataclasses.replace(FAST, concurrency=3, prefetch=0)
    worker, service, _ = build(registry, config, store)
    service.enqueue_many(ORG, "noop", [{}] * 100)
    with running(worker):
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="drain")
    assert max(store.asked) <= 3


# -- a prefetched job until a slot takes it -----------------------------------------------------


class Blocker:
    """A registry whose ``quick`` jobs end at once (so the worker prefetches) and whose
    ``block`` job holds the one slot until released; ``waiting`` jobs record that they ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocking = threading.Event()
        self.ran: list[int] = []
        self.registry = Registry("blocker")
        self.registry.register(JobType("quick", lambda ctx: None))
        self.registry.register(JobType("block", self._block))
        self.registry.register(JobType("waiting", self._waiting))

    def _block(self, ctx: JobContext) -> None:
        self.blocking.set()
        while not self.release.wait(0.01):
            if ctx.cancelled:
                ctx.raise_if_cancelled()

    def _waiting(self, ctx: JobContext) -> None:
        self.ran.append(ctx.payload["i"])

    def claim_ahead(self, service: JobService, store: InMemoryJobStore) -> list[Job]:
        """With the worker running on 20 ``quick`` jobs already enqueued: let them end (the
        worker now prefetches), hold the slot with ``block``, enqueue five ``waiting`` jobs and
        wait until they are claimed ahead of the slot; those five."""
        wait_until(lambda: all(j.status is Status.DONE for j in store.jobs), what="quick jobs")
        service.enqueue(ORG, "block")
        wait_until(self.blocking.is_set, what="the slot is held")
        waiting = service.enqueue_many(ORG, "waiting", [{"i": i} for i in range(5)])
        wait_until(
            lambda: all(job_of(store, j.id).status is Status.RUNNING for j in waiting),
            what="the waiting jobs claimed ahead of the slot",
        )
        return waiting


def test_a_prefetched_job_cancelled_before_a_slot_takes_it_never_runs() -> None:
    blocker = Blocker()
    worker, service, store = build(blocker.registry, dataclasses.replace(FAST, prefetch=20))
    service.enqueue_many(ORG, "quick", [{}] * 20)
    with running(worker):
        waiting = blocker.claim_ahead(service, store)
        for job in waiting:
            service.cancel(ORG, job.id)
        wait_until(
            lambda: all(job_of(store, j.id).status is Status.CANCELLED for j in waiting),
            what="the cancels",
        )
        blocker.release.set()
    assert blocker.ran == []


@pytest.mark.parametrize("graceful", [True, False])
def test_a_stop_hands_the_prefetched_jobs_back_with_their_attempt_refunded(
    graceful: bool,
) -> None:
    blocker = Blocker()
    worker, service, store = build(
        blocker.registry, dataclasses.replace(FAST, prefetch=20, shutdown_grace_s=0.5)
    )
    service.enqueue_many(ORG, "quick", [{}] * 20)
    with running(worker, graceful_stop=graceful):
        waiting = blocker.claim_ahead(service, store)
    after = [job_of(store, j.id) for j in waiting]
    assert [j.status for j in after] == [Status.QUEUED] * 5
    assert [j.attempts for j in after] == [0] * 5
    assert blocker.ran == []
    assert worker.stats["handed_back"] >= 5
