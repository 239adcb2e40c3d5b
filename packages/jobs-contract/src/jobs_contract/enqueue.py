"""The enqueue role's contract (:class:`jobs_core.ports.Enqueueing`): new jobs, the dedup keys
they hold and release (docs/contract.md §3), on every adapter."""

from __future__ import annotations

import pytest
from jobs_core import (
    Cancelled,
    DedupConflict,
    Done,
    Failed,
    FakeClock,
    Job,
    JobFilter,
    JobService,
    JobStore,
    Status,
)

from jobs_contract.fixtures import (  # noqa: F401 (fixtures: pytest sees them)
    clock_fixture,
    failures_fixture,
    service_fixture,
    store_fixture,
)
from jobs_contract.helpers import claim_one, finish, run_claimed, service_for

ORG = "org-a"
OTHER_ORG = "org-b"


# -- enqueue and dedup -------------------------------------------------------------------------


def test_enqueue_creates_a_queued_job(service: JobService, clock: FakeClock) -> None:
    result = service.enqueue(ORG, "reconcile", {"site_target_id": 7})
    job = result.job
    assert result.created
    assert job.status is Status.QUEUED
    assert job.attempts == 0
    assert job.payload == {"site_target_id": 7}
    assert job.created_at == clock.now()
    assert job.run_at == clock.now()
    assert job.max_attempts == 3
    assert job.id.version == 7
    assert service.get(ORG, job.id) == job


def test_second_enqueue_with_same_key_returns_the_queued_job(service: JobService) -> None:
    first = service.enqueue(ORG, "reconcile", {"n": 1}, dedup_key="map_reconcile:1")
    second = service.enqueue(ORG, "reconcile", {"n": 2}, dedup_key="map_reconcile:1")
    assert first.created
    assert not second.created
    assert second.job.id == first.job.id
    assert second.job.payload == {"n": 1}
    assert len(service.list_jobs(ORG, JobFilter())) == 1


def test_dedup_keys_are_scoped_per_org(service: JobService) -> None:
    mine = service.enqueue(ORG, "reconcile", dedup_key="k")
    theirs = service.enqueue(OTHER_ORG, "reconcile", dedup_key="k")
    assert mine.created
    assert theirs.created
    assert mine.job.id != theirs.job.id


def test_queue_scope_anti_lost_wakeup_scenario(service: JobService, clock: FakeClock) -> None:
    """Spec 000 §5 scenario A/B: once A runs, a new enqueue is accepted and runs after."""
    a = service.enqueue(ORG, "reconcile", {"run": "A"}, dedup_key="map_reconcile:1").job
    running_a = claim_one(service)
    assert running_a.id == a.id
    assert running_a.dedup_key is None  # released at claim for 'queue' scope
    clock.advance(1)
    b = service.enqueue(ORG, "reconcile", {"run": "B"}, dedup_key="map_reconcile:1")
    assert b.created
    assert b.job.id != a.id
    assert run_claimed(service, running_a, clock) is not None
    running_b = claim_one(service)
    assert running_b.id == b.job.id
    done_b = run_claimed(service, running_b, clock)
    assert done_b is not None
    assert done_b.status is Status.DONE
    assert service.get(ORG, a.id).status is Status.DONE


def test_active_scope_holds_the_key_until_the_job_ends(
    service: JobService, clock: FakeClock
) -> None:
    first = service.enqueue(ORG, "crawl", dedup_key="crawl:site-1").job
    running = claim_one(service)
    assert running.dedup_key == "crawl:site-1"
    again = service.enqueue(ORG, "crawl", dedup_key="crawl:site-1")
    assert not again.created
    assert again.job.id == first.id
    assert again.job.status is Status.RUNNING
    run_claimed(service, running, clock)
    after = service.enqueue(ORG, "crawl", dedup_key="crawl:site-1")
    assert after.created
    assert after.job.id != first.id


@pytest.mark.parametrize("ending", ["failed", "cancelled"])
def test_active_scope_releases_the_key_on_failure_and_cancellation(
    service: JobService, clock: FakeClock, ending: str
) -> None:
    service.enqueue(ORG, "crawl", dedup_key="crawl:site-1")
    running = claim_one(service)
    outcome = Failed("broken") if ending == "failed" else Cancelled()
    ended = service.complete(running.ref, outcome)
    assert ended is not None
    assert ended.status == Status(ending)
    assert ended.dedup_key is None
    assert service.enqueue(ORG, "crawl", dedup_key="crawl:site-1").created


def test_cancelling_a_queued_job_releases_its_key(service: JobService) -> None:
    job = service.enqueue(ORG, "crawl", dedup_key="crawl:site-1").job
    cancelled = service.cancel(ORG, job.id)
    assert cancelled.status is Status.CANCELLED
    assert cancelled.dedup_key is None
    assert service.enqueue(ORG, "crawl", dedup_key="crawl:site-1").created


class _WinnerFinishesBeforeReread:
    """Delegates to a real store, but the first re-read by key comes too late: the winner has
    been claimed and finished (and its key released) between the conflict and the re-read."""

    def __init__(self, store: JobStore, clock: FakeClock) -> None:
        self._store = store
        self._clock = clock
        self.rereads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
        self.rereads += 1
        if self.rereads == 1:
            for job in self._store.claim(10, self._clock.now()):
                finish(self._store, job.ref, Done({"raced": True}), self._clock.now())
        return self._store.find_by_dedup_key(org_id, dedup_key)


def test_race_fallback_reinserts_when_the_winner_vanished(
    store: JobStore, clock: FakeClock
) -> None:
    plain = service_for(store, clock)
    winner = plain.enqueue(ORG, "crawl", dedup_key="crawl:site-9").job
    racing_store = _WinnerFinishesBeforeReread(store, clock)
    racing = plain.using(racing_store)  # type: ignore[arg-type]
    result = racing.enqueue(ORG, "crawl", dedup_key="crawl:site-9")
    assert racing_store.rereads == 1
    assert result.created
    assert result.job.id != winner.id
    assert result.job.dedup_key == "crawl:site-9"
    assert plain.get(ORG, winner.id).status is Status.DONE


def test_enqueue_gives_up_with_a_typed_error_when_the_key_keeps_changing_hands(
    store: JobStore, clock: FakeClock
) -> None:
    class KeyAlwaysLost:
        def __init__(self, inner: JobStore) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

        def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
            return None

    service = service_for(store, clock)
    service.enqueue(ORG, "crawl", dedup_key="k")
    with pytest.raises(DedupConflict):
        service.using(KeyAlwaysLost(store)).enqueue(ORG, "crawl", dedup_key="k")  # type: ignore[arg-type]


def test_insert_many_skips_held_keys(service: JobService) -> None:
    service.enqueue(ORG, "crawl", dedup_key="held")
    jobs = service.enqueue_many(
        ORG, "crawl", [{"i": i} for i in range(5)], dedup_keys=[None, "held", "x", None, "y"]
    )
    assert sorted(j.payload["i"] for j in jobs) == [0, 2, 3, 4]
    assert service.stats(ORG)[Status.QUEUED] == 5
