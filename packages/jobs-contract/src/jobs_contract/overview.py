"""An org's operations view (:class:`jobs_core.ports.Overview`, issue 24): counts per type and
status following the list's filters, the series of finished jobs, waits and run times per bucket
(:mod:`jobs_core.overview`), jobs found by a prefix or the short id; never another org's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from jobs_core import FakeClock, JobService, JobStore, Status
from jobs_core.domain import Done, Failed
from jobs_core.overview import Window, bucket_starts, window_start
from jobs_core.overview_reads import OverviewReads

from jobs_contract.fixtures import (  # noqa: F401 (fixtures: pytest sees them)
    clock_fixture,
    failures_fixture,
    service_fixture,
    store_fixture,
)
from jobs_contract.helpers import claim_one, make_registry, run_claimed

ORG = "org-a"
OTHER = "org-b"


def test_counts_per_type_and_status_follow_the_filters(service: JobService) -> None:
    store = service.store
    for _ in range(2):
        service.enqueue(ORG, "reconcile")
    service.enqueue(ORG, "crawl")
    service.enqueue(OTHER, "reconcile")
    service.complete(claim_one(service).ref, Done())  # the oldest reconcile is done
    reads = OverviewReads(store, service.clock)
    every = {c.type: c.counts for c in reads.type_counts(ORG)}
    assert set(every) == {"crawl", "reconcile"}
    assert every["reconcile"][Status.QUEUED] == 1
    assert every["reconcile"][Status.DONE] == 1
    assert every["crawl"][Status.QUEUED] == 1
    assert sum(every["crawl"].values()) == 1
    queued = reads.type_counts(ORG, frozenset({Status.QUEUED}))
    assert {(c.type, c.total) for c in queued} == {("crawl", 1), ("reconcile", 1)}
    crawl = reads.type_counts(ORG, None, "crawl")
    assert [(c.type, c.total) for c in crawl] == [("crawl", 1)]
    assert reads.type_counts("org-c") == []


def test_a_series_counts_the_finished_jobs_and_their_wait_and_run_per_bucket(
    service: JobService, clock: FakeClock
) -> None:
    start = clock.now()
    waits = []
    for seconds_waited, outcome in ((2.0, Done()), (4.0, Done()), (6.0, Failed(error="no"))):
        service.enqueue(ORG, "reconcile")
        clock.advance(seconds_waited)
        claimed = claim_one(service)
        waits.append(seconds_waited)
        clock.advance(seconds_waited / 2)  # runs half as long as it waited
        service.complete(claimed.ref, outcome)
    service.enqueue(OTHER, "reconcile")
    service.complete(claim_one(service).ref, Done())  # another org's: never in ORG's series
    clock.advance(60)
    series = OverviewReads(service.store, clock).series(ORG, Window.HOUR)
    assert series.window is Window.HOUR
    assert series.bucket_s == 60.0
    assert series.start == window_start(Window.HOUR, clock.now())
    [reconcile] = series.types
    assert reconcile.type == "reconcile"
    assert [b.start for b in reconcile.buckets] == bucket_starts(Window.HOUR, clock.now())
    full = [b for b in reconcile.buckets if b.finished]
    assert len(full) == 1
    bucket = full[0]
    assert bucket.start == start
    assert (bucket.done, bucket.failed, bucket.cancelled) == (2, 1, 0)
    assert bucket.wait_p50 == pytest.approx(4.0)
    assert bucket.wait_p95 == pytest.approx(5.8)  # 4 + (6 - 4) * 0.9
    assert bucket.run_p50 == pytest.approx(2.0)
    assert bucket.run_p95 == pytest.approx(2.9)
    empty = [b for b in reconcile.buckets if b is not bucket]
    assert all(b.finished == 0 and b.wait_p50 is None and b.run_p50 is None for b in empty)


def test_every_attempt_counts_in_the_run_time_and_the_wait_starts_at_run_at(
    service: JobService, clock: FakeClock
) -> None:
    """A retried job: each attempt's run time is in the bucket it ended in; the job's wait is
    its last attempt's, from its due time (the backoff is not waiting)."""
    job = service.enqueue(ORG, "flaky").job
    for _ in range(3):
        clock.advance(10)  # past the backoff (2 s, 4 s)
        claimed = claim_one(service)
        clock.advance(1)
        run_claimed(service, claimed, clock)  # the handler raises its retryable error
    ended = service.get(ORG, job.id)
    assert ended.status is Status.FAILED
    series = OverviewReads(service.store, clock).series(ORG, Window.HOUR)
    [flaky] = series.types
    runs = [b for b in flaky.buckets if b.run_p50 is not None]
    assert len(runs) == 1
    assert runs[0].run_p50 == pytest.approx(1.0)
    [last] = [b for b in flaky.buckets if b.finished]
    assert last.failed == 1
    assert ended.started_at is not None
    assert last.wait_p50 == pytest.approx(
        (ended.started_at - max(ended.created_at, ended.run_at)).total_seconds()
    )


def test_a_window_holds_only_what_finished_in_it(service: JobService, clock: FakeClock) -> None:
    service.enqueue(ORG, "reconcile")
    service.complete(claim_one(service).ref, Done())
    clock.advance(timedelta(hours=2).total_seconds())
    reads = OverviewReads(service.store, clock)
    assert reads.series(ORG, Window.HOUR).types == []
    [day] = reads.series(ORG, Window.DAY).types
    assert day.type == "reconcile"
    assert len(day.buckets) == 48
    assert sum(b.done for b in day.buckets) == 1
    clock.advance(timedelta(days=1).total_seconds())
    assert reads.series(ORG, Window.DAY).types == []


def test_a_cancelled_job_that_never_ran_counts_without_a_wait(
    service: JobService, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "reconcile").job
    service.cancel(ORG, job.id)
    [reconcile] = OverviewReads(service.store, clock).series(ORG, Window.HOUR).types
    [bucket] = [b for b in reconcile.buckets if b.finished]
    assert bucket.cancelled == 1
    assert bucket.wait_p50 is None
    assert bucket.run_p50 is None


def test_jobs_are_found_by_prefix_and_short_id_in_their_org_only(store: JobStore) -> None:
    service = JobService(store, make_registry(), FakeClock())
    mine = [service.enqueue(ORG, "reconcile", {"n": n}).job for n in range(3)]
    theirs = service.enqueue(OTHER, "reconcile").job
    job = mine[1]
    assert store.find_by_prefix(ORG, job.id.hex, 5) == [job]
    for digits in (9, 20, 31):
        prefix = job.id.hex[:digits]
        expected = sorted((j for j in mine if j.id.hex.startswith(prefix)), key=lambda j: j.id)
        assert job in expected
        assert store.find_by_prefix(ORG, prefix, 5) == expected
    assert store.find_by_short_id(ORG, job.id.hex[-8:], 5) == [job]
    assert store.find_by_prefix(ORG, theirs.id.hex, 5) == []
    assert store.find_by_short_id(ORG, theirs.id.hex[-8:], 5) == []
    # Jobs made in the same instant share their first digits: a short prefix names them all.
    common = _common_prefix([j.id.hex for j in mine])
    if len(common) >= 8:
        found = store.find_by_prefix(ORG, common, 5)
        assert found == sorted(mine, key=lambda j: j.id)
        assert store.find_by_prefix(ORG, common, 2) == found[:2]


def test_a_lookup_names_one_job_or_the_candidates(store: JobStore) -> None:
    service = JobService(store, make_registry(), FakeClock())
    job = service.enqueue(ORG, "reconcile").job
    reads = OverviewReads(store, service.clock)
    assert reads.lookup(ORG, str(job.id)).jobs == [job]
    assert reads.lookup(ORG, str(job.id).upper()).jobs == [job]
    assert reads.lookup(ORG, job.id.hex[-8:]).jobs == [job]
    assert job in reads.lookup(ORG, f"  {job.id.hex[:12]} ").jobs
    assert reads.lookup(OTHER, str(job.id)).jobs == []
    for bad in ("", "xyz", "abc", job.id.hex + "0"):
        with pytest.raises(ValueError, match=r"job id|too short|32 hex"):
            reads.lookup(ORG, bad)


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]
