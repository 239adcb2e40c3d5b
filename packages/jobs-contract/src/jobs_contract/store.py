"""The store contract: every scenario of docs/contract.md the store can express, on every
adapter."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from jobs_core import (
    MAX_ATTEMPTS_EXCEEDED,
    Cancelled,
    DedupConflict,
    Done,
    Failed,
    FakeClock,
    InvalidTransition,
    Job,
    JobFilter,
    JobNotFound,
    JobService,
    JobStore,
    Requeue,
    Status,
    domain,
)
from jobs_core.domain import parse_heartbeat

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, finish, finish_many, run_claimed, service_for

ORG = "org-a"
OTHER_ORG = "org-b"
THRESHOLD_S = 600.0


@pytest.fixture
def failures() -> list[Job]:
    """Jobs passed to ``on_fail``, in order."""
    return []


@pytest.fixture
def service(store: JobStore, clock: FakeClock, failures: list[Job]) -> JobService:
    """The use cases over the store under test."""
    return service_for(store, clock, failures)


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


# -- claiming ------------------------------------------------------------------------------


def test_claim_takes_oldest_due_jobs_first(service: JobService, clock: FakeClock) -> None:
    ids = []
    for i in range(5):
        ids.append(service.enqueue(ORG, "reconcile", {"i": i}).job.id)
        clock.advance(0.001)
    claimed = service.claim(3)
    assert [j.id for j in claimed] == ids[:3]
    assert all(j.status is Status.RUNNING and j.attempts == 1 for j in claimed)
    assert all(j.started_at == clock.now() for j in claimed)
    assert len({j.lease for j in claimed}) == 3
    assert [j.id for j in service.claim(10)] == ids[3:]
    assert service.claim(10) == []


def test_claim_skips_jobs_not_yet_due_and_unknown_types(
    store: JobStore, service: JobService, clock: FakeClock
) -> None:
    later = service.enqueue(ORG, "reconcile", run_at=clock.now() + timedelta(seconds=30)).job
    other = service.enqueue(ORG, "crawl").job
    assert store.claim(10, clock.now(), ["reconcile"]) == []
    clock.advance(31)
    assert [j.id for j in store.claim(10, clock.now(), ["reconcile"])] == [later.id]
    assert [j.id for j in store.claim(10, clock.now(), None)] == [other.id]


def test_concurrent_claimers_never_take_a_job_twice(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    """Spec 000 §5: exclusive claim with concurrent workers."""
    total = 300
    service.enqueue_many(ORG, "reconcile", [{"i": i} for i in range(total)])
    taken: list[uuid.UUID] = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def claimer() -> None:
        start.wait()
        while batch := store.claim(7, clock.now()):
            with lock:
                taken.extend(j.id for j in batch)

    threads = [threading.Thread(target=claimer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    duplicates = [job_id for job_id, n in Counter(taken).items() if n > 1]
    assert duplicates == []
    assert len(taken) == total
    assert service.stats(ORG)[Status.RUNNING] == total


# -- finishing ---------------------------------------------------------------------------


def test_done_records_the_report_and_releases_the_key(
    service: JobService, clock: FakeClock
) -> None:
    service.enqueue(ORG, "crawl", {"x": 1}, dedup_key="k")
    running = claim_one(service)
    clock.advance(2)
    done = run_claimed(service, running, clock)
    assert done is not None
    assert done.status is Status.DONE
    assert done.report == {"echo": {"x": 1}}
    assert done.finished_at == clock.now()
    assert done.dedup_key is None
    assert done.error is None


def test_handler_failure_is_definitive_and_calls_on_fail(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    """Spec 000 §5: handler failure → failed + error + on_fail invoked."""
    job = service.enqueue(ORG, "boom").job
    failed = run_claimed(service, claim_one(service), clock)
    assert failed is not None
    assert failed.status is Status.FAILED
    assert failed.error == "ValueError: the handler broke"
    assert failed.report is not None
    assert failed.report["exception_type"] == "ValueError"
    assert "Traceback" in failed.report["traceback"]
    assert failed.attempts == 1
    assert [j.id for j in failures] == [job.id]
    assert service.claim(1) == []  # no automatic retry


def test_retryable_error_requeues_with_backoff_until_max_attempts(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    job = service.enqueue(ORG, "flaky", dedup_key="flaky:1").job
    delays = []
    for attempt in (1, 2):
        running = claim_one(service)
        assert running.attempts == attempt
        requeued = run_claimed(service, running, clock)
        assert requeued is not None
        assert requeued.status is Status.QUEUED
        assert requeued.error == "Flaky: try again later"
        delays.append((requeued.run_at - clock.now()).total_seconds())
        assert service.claim(1) == []  # not due before the backoff
        clock.advance(delays[-1])
    assert delays == [2.0, 4.0]
    last = run_claimed(service, claim_one(service), clock)
    assert last is not None
    assert last.status is Status.FAILED
    assert last.attempts == 3
    assert [j.id for j in failures] == [job.id]


def test_requeued_job_never_takes_back_a_released_key(
    service: JobService, clock: FakeClock
) -> None:
    service.enqueue(ORG, "flaky", dedup_key="flaky:k")
    running = claim_one(service)
    newer = service.enqueue(ORG, "flaky", dedup_key="flaky:k")
    assert newer.created
    requeued = run_claimed(service, running, clock)
    assert requeued is not None
    assert requeued.status is Status.QUEUED
    assert requeued.dedup_key is None
    assert service.store.find_by_dedup_key(ORG, "flaky:k") == service.get(ORG, newer.job.id)


def test_finish_many_applies_each_outcome_and_skips_stale_refs(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    for i in range(3):
        service.enqueue(ORG, "reconcile", {"i": i})
        clock.advance(0.001)
    a, b, c = service.claim(3)
    finish(store, c.ref, Done(), clock.now())
    results = finish_many(
        store, [(a.ref, Done({"a": 1})), (c.ref, Done()), (b.ref, Failed("nope"))], clock.now()
    )
    assert [r.status if r else None for r in results] == [Status.DONE, None, Status.FAILED]
    assert results[0] is not None
    assert results[0].report == {"a": 1}
    assert finish_many(store, [], clock.now()) == []


def test_complete_and_claim_writes_the_outcomes_then_claims_the_next_jobs(
    service: JobService, clock: FakeClock, failures: list[Job]
) -> None:
    for i in range(5):
        service.enqueue(ORG, "reconcile", {"i": i})
        clock.advance(0.001)
    a, b, c = service.claim(3)
    finish(service.store, c.ref, Done(), clock.now())
    finished, claimed = service.complete_and_claim(
        [(a.ref, Requeue(run_at=clock.now())), (b.ref, Failed("nope")), (c.ref, Done())], 5
    )
    assert [j.status if j else None for j in finished] == [Status.QUEUED, Status.FAILED, None]
    assert [f.id for f in failures] == [b.id]  # on_fail, as complete_many calls it
    # The two jobs still queued, oldest first; not the one re-queued by the same call (a
    # worker's outcome-and-claim never hands its own re-queued job back to itself at once).
    assert [j.payload["i"] for j in claimed] == [3, 4]
    assert {j.status for j in claimed} == {Status.RUNNING}
    assert [j.id for j in service.claim(5)] == [a.id]
    assert service.complete_and_claim([], 1) == ([], [])


# -- progress, heartbeats, fencing ---------------------------------------------------------


def test_progress_is_written_with_updated_at_and_survives_a_reclaim(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    first = claim_one(service)
    assert store.save_progress(first.ref, {"done": 5, "total": 10, "cursor": "abc"}, clock.now())
    progress = service.get(ORG, first.id).progress
    assert progress is not None
    assert {k: v for k, v in progress.items() if k != "updated_at"} == {
        "done": 5,
        "total": 10,
        "cursor": "abc",
    }
    assert parse_heartbeat(progress) == clock.now()
    clock.advance(THRESHOLD_S + 1)
    service.sweep(THRESHOLD_S)
    second = claim_one(service)
    assert second.attempts == 2
    assert second.progress is not None
    assert second.progress["cursor"] == "abc"  # the checkpoint a resumable handler reads


def test_heartbeat_keeps_a_live_long_job_from_the_sweep(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    for _ in range(5):
        clock.advance(THRESHOLD_S / 2)
        assert store.heartbeat([running.ref], clock.now()) == {running.id}
        report = service.sweep(THRESHOLD_S)
        assert report.requeued == []
        assert report.failed == []
    assert service.get(ORG, running.id).status is Status.RUNNING


def test_a_stale_worker_cannot_overwrite_the_newer_attempt(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    old = claim_one(service)
    clock.advance(THRESHOLD_S + 1)
    service.sweep(THRESHOLD_S)
    new = claim_one(service)
    assert new.lease != old.lease
    assert store.heartbeat([old.ref], clock.now()) == set()
    assert not store.save_progress(old.ref, {"done": 1}, clock.now())
    assert finish(store, old.ref, Done({"stale": True}), clock.now()) is None
    assert store.cancel_requested([old.ref]) == set()
    current = service.get(ORG, new.id)
    assert current.status is Status.RUNNING
    assert current.lease == new.lease
    finished = finish(store, new.ref, Done({"fresh": True}), clock.now())
    assert finished is not None
    assert finished.report == {"fresh": True}


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


# -- org-scoped actions ----------------------------------------------------------------------


def test_a_foreign_org_never_sees_or_touches_a_job(service: JobService, clock: FakeClock) -> None:
    """Spec 000 §5 and invariant 8: another org's job is simply not found."""
    job = service.enqueue(ORG, "reconcile").job
    with pytest.raises(JobNotFound):
        service.get(OTHER_ORG, job.id)
    with pytest.raises(JobNotFound):
        service.cancel(OTHER_ORG, job.id)
    with pytest.raises(JobNotFound):
        service.retry(OTHER_ORG, job.id)
    with pytest.raises(JobNotFound):
        service.delete(OTHER_ORG, job.id)
    assert service.list_jobs(OTHER_ORG, JobFilter()) == []
    assert sum(service.stats(OTHER_ORG).values()) == 0
    assert service.store.find_by_dedup_key(OTHER_ORG, "any") is None
    assert service.get(ORG, job.id).status is Status.QUEUED
    with pytest.raises(JobNotFound):
        service.get(ORG, uuid.uuid4())


def test_cancel_a_running_job_is_a_request_seen_by_its_worker(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    assert store.cancel_requested([running.ref]) == set()
    requested = service.cancel(ORG, running.id)
    assert requested.status is Status.RUNNING
    assert requested.cancel_requested_at == clock.now()
    assert store.cancel_requested([running.ref]) == {running.id}
    ended = service.complete(running.ref, Cancelled({"stopped_at": 3}))
    assert ended is not None
    assert ended.status is Status.CANCELLED
    assert ended.finished_at == clock.now()
    with pytest.raises(InvalidTransition):
        service.cancel(ORG, running.id)


def test_retry_requeues_a_failed_job_with_a_fresh_budget_and_its_key(
    service: JobService, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "boom", dedup_key="boom:1").job
    run_claimed(service, claim_one(service), clock)
    clock.advance(5)
    retried = service.retry(ORG, job.id)
    assert retried.status is Status.QUEUED
    assert retried.attempts == 0
    assert retried.dedup_key == "boom:1"
    assert retried.error is None
    assert retried.finished_at is None
    assert retried.run_at == clock.now()
    assert not service.enqueue(ORG, "boom", dedup_key="boom:1").created
    assert claim_one(service).attempts == 1


def test_retry_is_refused_while_another_job_holds_the_key(
    service: JobService, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "boom", dedup_key="boom:1").job
    run_claimed(service, claim_one(service), clock)
    service.enqueue(ORG, "boom", dedup_key="boom:1")
    with pytest.raises(DedupConflict):
        service.retry(ORG, job.id)
    assert service.get(ORG, job.id).status is Status.FAILED


@pytest.mark.parametrize("state", ["queued", "running", "done"])
def test_retry_is_refused_unless_failed_or_cancelled(
    service: JobService, clock: FakeClock, state: str
) -> None:
    job = service.enqueue(ORG, "reconcile").job
    if state != "queued":
        running = claim_one(service)
        if state == "done":
            run_claimed(service, running, clock)
    with pytest.raises(InvalidTransition):
        service.retry(ORG, job.id)


def test_delete_only_finished_jobs_and_never_protected_types(
    service: JobService, clock: FakeClock
) -> None:
    queued = service.enqueue(ORG, "reconcile").job
    with pytest.raises(InvalidTransition):
        service.delete(ORG, queued.id)
    service.cancel(ORG, queued.id)
    service.delete(ORG, queued.id)
    with pytest.raises(JobNotFound):
        service.get(ORG, queued.id)
    history = service.enqueue(ORG, "history").job
    run_claimed(service, claim_one(service), clock)
    with pytest.raises(InvalidTransition, match="never deleted"):
        service.delete(ORG, history.id)
    assert service.get(ORG, history.id).status is Status.DONE


def test_list_is_newest_first_filtered_and_paged_by_cursor(
    service: JobService, clock: FakeClock
) -> None:
    made = []
    for i in range(7):
        made.append(service.enqueue(ORG, "reconcile" if i % 2 else "crawl", {"i": i}).job)
        clock.advance(1)
    service.enqueue(OTHER_ORG, "crawl")
    page1 = service.list_jobs(ORG, JobFilter(limit=3))
    assert [j.payload["i"] for j in page1] == [6, 5, 4]
    last = page1[-1]
    page2 = service.list_jobs(ORG, JobFilter(limit=3, before=(last.created_at, last.id)))
    assert [j.payload["i"] for j in page2] == [3, 2, 1]
    crawls = service.list_jobs(ORG, JobFilter(type="crawl"))
    assert [j.payload["i"] for j in crawls] == [6, 4, 2, 0]
    service.cancel(ORG, made[0].id)
    finished = service.list_jobs(ORG, JobFilter(statuses=frozenset({Status.CANCELLED})))
    assert [j.id for j in finished] == [made[0].id]
    stats = service.stats(ORG)
    assert stats[Status.QUEUED] == 6
    assert stats[Status.CANCELLED] == 1
    assert set(stats) == set(Status)


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


def test_a_refunded_requeue_hands_the_attempt_back(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    """A worker shutting down returns its unfinished attempt without consuming max_attempts."""
    service.enqueue(ORG, "crawl", dedup_key="crawl:r")
    running = claim_one(service)
    assert running.attempts == 1
    back = finish(store, running.ref, Requeue(run_at=clock.now(), refund_attempt=True), clock.now())
    assert back is not None
    assert back.status is Status.QUEUED
    assert back.attempts == 0
    assert back.dedup_key == "crawl:r"
    assert claim_one(service).attempts == 1
