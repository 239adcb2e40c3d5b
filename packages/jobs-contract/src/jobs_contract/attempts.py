"""The attempts role's contract (:class:`jobs_core.ports.Attempts`): claims, the end of
attempts, retries, progress, heartbeats and the lease fence (docs/contract.md §2, §4, §5), on
every adapter."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import timedelta

from jobs_core import (
    Done,
    Failed,
    FakeClock,
    Job,
    JobService,
    JobStore,
    Requeue,
    Status,
)
from jobs_core.domain import parse_heartbeat

from jobs_contract.fixtures import (  # noqa: F401 (fixtures: pytest sees them)
    clock_fixture,
    failures_fixture,
    service_fixture,
    store_fixture,
)
from jobs_contract.helpers import claim_one, finish, finish_many, run_claimed

ORG = "org-a"
THRESHOLD_S = 600.0


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
