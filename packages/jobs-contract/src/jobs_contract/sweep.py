"""The sweep's contract (:class:`jobs_core.ports.Recovery`): the jobs of lost workers requeued,
failed or cancelled once each (docs/contract.md §5), on every adapter."""

from __future__ import annotations

import threading
from datetime import timedelta

from jobs_core import (
    MAX_ATTEMPTS_EXCEEDED,
    FakeClock,
    Job,
    JobService,
    JobStore,
    Requeue,
    Status,
    domain,
)

from jobs_contract.fixtures import (  # noqa: F401 (fixtures: pytest sees them)
    clock_fixture,
    failures_fixture,
    service_fixture,
    store_fixture,
)
from jobs_contract.helpers import claim_one, finish

ORG = "org-a"
THRESHOLD_S = 600.0


# -- the sweep -------------------------------------------------------------------------------


def test_zombie_is_requeued_and_the_next_claim_counts_the_attempt(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    """Spec 000 §5: zombie back to queued, attempts incremented by the next claim."""
    job = service.enqueue(ORG, "reconcile").job
    claim_one(service)
    clock.advance(THRESHOLD_S - 1)
    assert service.sweep(THRESHOLD_S).requeued == []
    clock.advance(2)
    report = service.sweep(THRESHOLD_S)
    assert [j.id for j in report.requeued] == [job.id]
    swept = service.get(ORG, job.id)
    assert swept.status is Status.QUEUED
    assert swept.attempts == 1
    again = claim_one(service)
    assert again.attempts == 2
    assert failures == []


def test_zombie_at_the_cap_fails_for_good_and_the_queue_goes_on(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    """Spec 000 §5: zombie at max_attempts (3) → failed definitively; the next job is taken."""
    poisoned = service.enqueue(ORG, "crawl", dedup_key="crawl:poison").job
    clock.advance(0.001)
    for _ in range(3):
        running = claim_one(service)
        assert running.id == poisoned.id
        clock.advance(THRESHOLD_S + 1)
        service.sweep(THRESHOLD_S)
    final = service.get(ORG, poisoned.id)
    assert final.status is Status.FAILED
    assert final.error == MAX_ATTEMPTS_EXCEEDED
    assert final.attempts == 3
    assert final.finished_at == clock.now()
    assert final.dedup_key is None
    assert [j.id for j in failures] == [poisoned.id]
    behind = service.enqueue(ORG, "reconcile").job
    assert claim_one(service).id == behind.id


def test_sweep_skips_a_job_that_showed_life_after_it_was_found(
    store: JobStore, service: JobService, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    clock.advance(THRESHOLD_S + 1)
    stale_before = clock.now() - timedelta(seconds=THRESHOLD_S)
    [found] = store.find_stale(stale_before, 10)
    store.heartbeat([running.ref], clock.now())  # the worker was slow, not dead
    requeue = Requeue(run_at=clock.now())
    sweep = domain.patch(found.ref, requeue, clock.now(), seen_at=found.heartbeat_at)
    assert store.complete([sweep]).finished[0] is None
    assert service.get(ORG, running.id).status is Status.RUNNING


def test_two_sweepers_at_once_apply_each_zombie_once(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    for i in range(20):
        service.enqueue(ORG, "reconcile", {"i": i})
    running = service.claim(20)
    for job in running[:10]:  # these are at their cap: they will fail
        finish(service.store, job.ref, Requeue(run_at=clock.now()), clock.now())
    service.claim(10)
    service.claim(10)
    clock.advance(THRESHOLD_S + 1)
    reports = []
    barrier = threading.Barrier(2)

    def sweeper() -> None:
        barrier.wait()
        reports.append(service.sweep(THRESHOLD_S))

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    swept = [j.id for r in reports for j in r.requeued + r.failed + r.cancelled]
    assert len(swept) == 20
    assert len(set(swept)) == 20


def test_a_zombie_whose_cancellation_was_requested_ends_cancelled(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    job = service.enqueue(ORG, "crawl", dedup_key="crawl:z").job
    claim_one(service)
    service.cancel(ORG, job.id)
    clock.advance(THRESHOLD_S + 1)
    report = service.sweep(THRESHOLD_S)
    assert report.requeued == []
    assert [j.id for j in report.cancelled] == [job.id]
    ended = service.get(ORG, job.id)
    assert ended.status is Status.CANCELLED
    assert ended.dedup_key is None
    assert failures == []
    assert service.claim(5) == []
