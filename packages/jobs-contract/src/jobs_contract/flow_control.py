"""Flow control on every adapter (docs/flow-control.md): type-owned dedup keys, concurrency
limits per key and per type enforced by the claim, priorities, snooze, and "why is this job
waiting?" (the worker registry itself: ``jobs_contract.workers``)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from jobs_core import (
    Cancelled,
    DedupScope,
    Done,
    Failed,
    FakeClock,
    Job,
    JobContext,
    JobFilter,
    JobService,
    JobStore,
    JobType,
    PayloadInvalid,
    Registry,
    Status,
)
from jobs_core.errors import DedupKeyOwned
from jobs_core.flow import KeyScope, scoped_key
from jobs_core.runner import SNOOZED_TOO_OFTEN, execute
from jobs_core.workers import WorkerInfo

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)

ORG = "org-a"
OTHER_ORG = "org-b"


def _ok(ctx: JobContext) -> Mapping[str, Any]:
    return {"site": ctx.payload.get("site_id")}


def _snoozing(ctx: JobContext) -> None:
    ctx.snooze(30, "upstream said 429, Retry-After: 30")


def flow_registry() -> Registry:
    registry = Registry("flow")
    # The Crawl case: one active crawl per site (a type-owned key in scope 'active'), and at
    # most 2 running crawls per site however they were enqueued.
    registry.register(
        JobType(
            "crawl",
            _ok,
            dedup_key="crawl:{site_id}",
            dedup_scope=DedupScope.ACTIVE,
            concurrency_key="site_id",
            concurrency_limit=2,
        )
    )
    registry.register(JobType("fetch", _ok, concurrency_key="site_id", concurrency_limit=2))
    registry.register(JobType("single", _ok, concurrency_key="site_id", concurrency_limit=1))
    registry.register(
        JobType(
            "account",
            _ok,
            concurrency_key="site_id",
            concurrency_limit=1,
            concurrency_scope=KeyScope.GLOBAL,
        )
    )
    registry.register(JobType("capped", _ok, max_running=3))
    registry.register(JobType("plain", _ok))
    registry.register(JobType("snoozy", _snoozing, max_snoozes=2))
    return registry


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return JobService(store, flow_registry(), clock)


def _finish(service: JobService, job: Job, clock: FakeClock) -> Job | None:
    context = JobContext(job, progress_sink=lambda _doc: True, now=clock.now)
    return service.complete(job.ref, execute(service.registry.get(job.type), context, clock.now))


def _filter(status: Status) -> JobFilter:
    return JobFilter(statuses=frozenset({status}), limit=1000)


# -- type-owned dedup keys ----------------------------------------------------------------------


def test_a_type_owned_dedup_key_is_derived_on_every_enqueue_path(service: JobService) -> None:
    first = service.enqueue(ORG, "crawl", {"site_id": 42})
    assert first.created
    assert first.job.dedup_key == "crawl:42"
    # no key, or the same key: the active crawl of the site is returned
    again = service.enqueue(ORG, "crawl", {"site_id": 42})
    same = service.enqueue(ORG, "crawl", {"site_id": 42}, dedup_key="crawl:42")
    assert not again.created
    assert again.job.id == first.job.id
    assert not same.created
    assert same.job.id == first.job.id
    # bulk: derived too, so a second crawl of site 42 is skipped and site 43's is one job
    bulk = service.enqueue_many(ORG, "crawl", [{"site_id": 42}, {"site_id": 43}, {"site_id": 43}])
    assert [j.dedup_key for j in bulk] == ["crawl:43"]
    queued = service.list_jobs(ORG, _filter(Status.QUEUED))
    assert sorted(j.dedup_key or "" for j in queued) == ["crawl:42", "crawl:43"]


def test_a_different_explicit_key_is_refused(service: JobService) -> None:
    with pytest.raises(DedupKeyOwned) as refused:
        service.enqueue(ORG, "crawl", {"site_id": 42}, dedup_key="mine")
    assert refused.value.errors[0]["loc"] == ["dedup_key"]
    assert "crawl:42" in str(refused.value)
    with pytest.raises(DedupKeyOwned):
        service.enqueue_many(ORG, "crawl", [{"site_id": 1}], dedup_keys=["other"])
    assert service.list_jobs(ORG, _filter(Status.QUEUED)) == []


def test_a_key_field_missing_from_the_payload_is_refused(service: JobService) -> None:
    for payload in ({}, {"site_id": None}, {"site_id": ""}, {"site_id": [1]}, {"site_id": True}):
        with pytest.raises(PayloadInvalid):
            service.enqueue(ORG, "crawl", payload)
        with pytest.raises(PayloadInvalid):
            service.enqueue(ORG, "fetch", payload)


# -- concurrency limits -------------------------------------------------------------------------


def test_a_key_never_runs_more_than_its_limit(service: JobService, clock: FakeClock) -> None:
    for _ in range(5):
        service.enqueue(ORG, "fetch", {"site_id": 1})
    service.enqueue(ORG, "fetch", {"site_id": 2})
    claimed = service.claim(10)
    assert Counter(j.payload["site_id"] for j in claimed) == {1: 2, 2: 1}
    assert {j.concurrency_key for j in claimed} == {
        scoped_key(ORG, "1", KeyScope.ORG),
        scoped_key(ORG, "2", KeyScope.ORG),
    }
    assert service.claim(10) == []  # both keys full: nothing, and no attempt spent
    queued = service.list_jobs(ORG, _filter(Status.QUEUED))
    assert len(queued) == 3
    assert all(j.attempts == 0 for j in queued)
    # ending one frees its place at once
    site1 = next(j for j in claimed if j.payload["site_id"] == 1)
    _finish(service, site1, clock)
    more = service.claim(10)
    assert [j.payload["site_id"] for j in more] == [1]


def test_a_key_is_counted_per_org_unless_the_type_says_global(service: JobService) -> None:
    """Two orgs' ``site_id=1`` are two keys (no tenant takes another's slots); a global key
    (``concurrency_scope=KeyScope.GLOBAL``) is one limit for every org."""
    for org in (ORG, OTHER_ORG):
        service.enqueue_many(org, "single", [{"site_id": 1}] * 3)
        service.enqueue_many(org, "account", [{"site_id": 1}] * 3)
    claimed = service.claim(20)
    singles = Counter(j.org_id for j in claimed if j.type == "single")
    assert singles == {ORG: 1, OTHER_ORG: 1}
    assert [j.type for j in claimed].count("account") == 1
    assert service.claim(20) == []  # every key full: per org for 'single', one for 'account'


def test_a_saturated_key_at_the_head_never_holds_back_another(
    service: JobService, clock: FakeClock
) -> None:
    service.enqueue(ORG, "single", {"site_id": "busy"})
    (busy,) = service.claim(1)
    service.enqueue_many(ORG, "single", [{"site_id": "busy"}] * 2000)
    clock.advance(1)
    other = service.enqueue(ORG, "single", {"site_id": "idle"}).job
    claimed = service.claim(1)
    assert [j.id for j in claimed] == [other.id]
    assert busy.status is Status.RUNNING


def test_the_type_cap_counts_every_key(service: JobService) -> None:
    service.enqueue_many(ORG, "capped", [{"n": i} for i in range(10)])
    assert len(service.claim(10)) == 3
    assert service.claim(10) == []
    service.enqueue(ORG, "plain", {})
    assert [j.type for j in service.claim(10)] == ["plain"]  # another type is not capped


def test_a_claim_under_limits_takes_the_jobs_of_unlimited_types_in_claim_order(
    service: JobService, clock: FakeClock
) -> None:
    """A registry with limited types claims its other types' jobs in the same call, in claim
    order with the limited ones that fit (on PostgreSQL the first statement claims them and the
    second admits only the limited candidates: neither is left out nor taken twice)."""
    low = service.enqueue(ORG, "plain", {"n": 1}).job
    clock.advance(1)
    singles = [service.enqueue(ORG, "single", {"site_id": 9}).job for _ in range(2)]
    clock.advance(1)
    urgent = service.enqueue(ORG, "plain", {"n": 2}, priority=5).job
    claimed = service.claim(10)
    assert [j.id for j in claimed] == [urgent.id, low.id, singles[0].id]
    assert all(j.status is Status.RUNNING and j.attempts == 1 for j in claimed)
    assert service.get(ORG, singles[1].id).status is Status.QUEUED  # its key is full
    # Only unlimited jobs queued: claimed all the same, and a re-queued one is not taken back.
    plains = [service.enqueue(ORG, "plain", {"n": 10 + i}).job for i in range(3)]
    finished, more = service.complete_and_claim(
        [(claimed[0].ref, Failed(error="once")), (claimed[1].ref, Done())], 10
    )
    assert [j.status for j in finished if j is not None] == [Status.FAILED, Status.DONE]
    assert sorted(j.id for j in more) == sorted(j.id for j in plains)
    assert service.claim(10) == []  # the single's key is still full, nothing else queued


@pytest.mark.parametrize("ending", ["done", "failed", "cancelled", "swept", "snoozed"])
def test_every_end_of_a_job_frees_its_place(
    service: JobService, clock: FakeClock, ending: str
) -> None:
    service.enqueue(ORG, "single", {"site_id": 7})
    service.enqueue(ORG, "single", {"site_id": 7})
    (job,) = service.claim(5)
    assert service.claim(5) == []
    if ending == "done":
        service.complete(job.ref, Done())
    elif ending == "failed":
        service.complete(job.ref, Failed(error="broke"))
    elif ending == "cancelled":
        service.cancel(ORG, job.id)
        service.complete(job.ref, Cancelled())
    elif ending == "swept":
        clock.advance(700)
        assert service.sweep(600).requeued
    else:
        from jobs_core import Requeue

        service.complete(job.ref, Requeue(run_at=clock.now() + timedelta(hours=1), snooze=True))
    nxt = service.claim(5)
    assert len(nxt) == 1


def test_a_job_requeued_with_a_claim_under_limits_is_left_queued(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    """The claim sent with outcomes never takes back a job those outcomes re-queue, and never
    leaves it running unseen (a claim dropped is a job no worker holds, swept much later)."""
    from jobs_core import Requeue

    (job,) = [service.enqueue(ORG, "fetch", {"site_id": 1}).job]
    (running,) = service.claim(5)
    finished, claimed = service.complete_and_claim(
        [(running.ref, Requeue(run_at=clock.now(), error="flaky"))], 5
    )
    assert finished[0] is not None
    assert finished[0].status is Status.QUEUED
    assert claimed == []
    assert service.get(ORG, job.id).status is Status.QUEUED
    assert [j.id for j in service.claim(5)] == [job.id]


def test_concurrent_claimers_never_exceed_the_limits(store: JobStore, clock: FakeClock) -> None:
    """Eight claimers at once (threads, each call its own connection on PostgreSQL)."""
    service = JobService(store, flow_registry(), clock)
    service.enqueue_many(ORG, "fetch", [{"site_id": i % 3} for i in range(60)])
    service.enqueue_many(ORG, "capped", [{"n": i} for i in range(30)])
    claimed: list[Job] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def claimer() -> None:
        barrier.wait()
        for _ in range(5):
            got = service.claim(2)
            with lock:
                claimed.extend(got)

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    per_key = Counter(j.payload["site_id"] for j in claimed if j.type == "fetch")
    assert per_key == {0: 2, 1: 2, 2: 2}
    assert sum(j.type == "capped" for j in claimed) == 3
    assert len({j.id for j in claimed}) == len(claimed)


# -- priorities ---------------------------------------------------------------------------------


def test_higher_priority_runs_first_then_oldest(service: JobService, clock: FakeClock) -> None:
    low = service.enqueue(ORG, "plain", {"n": 1}, priority=-5).job
    clock.advance(1)
    mid = service.enqueue(ORG, "plain", {"n": 2}).job
    clock.advance(1)
    high = service.enqueue_many(ORG, "plain", [{"n": 3}, {"n": 4}], priority=10)
    clock.advance(1)
    mid2 = service.enqueue(ORG, "plain", {"n": 5}, priority=0).job
    assert [high[0].priority, low.priority, mid.priority] == [10, -5, 0]
    order = [j.id for j in service.claim(10)]
    assert set(order[:2]) == {high[0].id, high[1].id}  # one instant: ties go by id
    assert order[2:] == [mid.id, mid2.id, low.id]
    stored = service.get(ORG, low.id)
    assert stored.priority == -5


@pytest.mark.parametrize("priority", [101, -101, 1.5, "1", True])
def test_a_priority_outside_the_range_is_refused(service: JobService, priority: Any) -> None:
    with pytest.raises(ValueError, match="priority"):
        service.enqueue(ORG, "plain", {}, priority=priority)
    with pytest.raises(ValueError, match="priority"):
        service.enqueue_many(ORG, "plain", [{}], priority=priority)


# -- snooze -------------------------------------------------------------------------------------


def test_a_snooze_runs_later_without_spending_an_attempt(
    service: JobService, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "snoozy", {}).job
    (claimed,) = service.claim(1)
    snoozed = _finish(service, claimed, clock)
    assert snoozed is not None
    assert snoozed.status is Status.QUEUED
    assert snoozed.attempts == 0
    assert snoozed.snoozes == 1
    assert snoozed.run_at == clock.now() + timedelta(seconds=30)
    assert snoozed.error is None
    assert service.claim(1) == []  # not before its time
    reasons = service.why_waiting(service.get(ORG, job.id))
    assert reasons[0].code == "snoozed"
    assert "snoozed 1 times" in reasons[0].message
    clock.advance(30)
    _finish(service, service.claim(1)[0], clock)
    clock.advance(30)
    # the third snooze is past max_snoozes=2: the job fails instead of looping for ever
    ended = _finish(service, service.claim(1)[0], clock)
    assert ended is not None
    assert ended.status is Status.FAILED
    assert ended.error is not None
    assert ended.error.startswith(SNOOZED_TOO_OFTEN)
    assert ended.snoozes == 2
    assert ended.attempts == 1


# -- workers and "why is this job waiting?" -------------------------------------------------------


def _worker(clock: FakeClock, types: tuple[str, ...]) -> WorkerInfo:
    now = clock.now()
    return WorkerInfo(uuid.uuid4(), "host-1", 4242, types, 4, now, now)


def test_why_a_job_is_waiting(store: JobStore, service: JobService, clock: FakeClock) -> None:
    later = service.enqueue(ORG, "plain", {}, run_at=clock.now() + timedelta(hours=1)).job
    codes = [r.code for r in service.why_waiting(later)]
    assert codes == ["scheduled", "no_worker"]
    store.register_worker(_worker(clock, ("plain", "fetch", "capped")))
    assert [r.code for r in service.why_waiting(later)] == ["scheduled"]

    service.enqueue_many(ORG, "fetch", [{"site_id": 9}] * 3)
    service.claim(5)
    waiting = service.list_jobs(ORG, _filter(Status.QUEUED))
    fetch = next(j for j in waiting if j.type == "fetch")
    reasons = service.why_waiting(fetch)
    assert [r.code for r in reasons] == ["key_busy"]
    assert "site_id=9 is at 2 of 2 running" in reasons[0].message

    service.enqueue_many(ORG, "capped", [{"n": i} for i in range(5)])
    service.claim(10)
    capped = [j for j in service.list_jobs(ORG, _filter(Status.QUEUED)) if j.type == "capped"]
    newest = max(capped, key=lambda j: (j.created_at, j.id))
    reasons = service.why_waiting(newest)
    assert [r.code for r in reasons] == ["type_busy", "ahead"]
    assert "3 of 3 running" in reasons[0].message
    assert reasons[1].message.startswith("1 due")

    free = service.enqueue(ORG, "plain", {}).job
    assert [r.code for r in service.why_waiting(free)] == ["next"]
    (running,) = service.claim(1)
    assert service.why_waiting(service.get(ORG, running.id)) == []
