"""Rate limits per key on every adapter (``jobs_core.rates``, decision 0042): at most N starts
per key in any window of P seconds, keys independent (per org unless global), composed with
concurrency limits, priorities, fairness and the claim sent with outcomes, on the fake clock;
"why is this job waiting?" names the next start."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from jobs_core import (
    Done,
    FakeClock,
    Job,
    JobContext,
    JobFilter,
    JobService,
    JobStore,
    JobType,
    Registry,
    Requeue,
    Status,
)
from jobs_core.flow import KeyScope

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)

ORG = "org-a"
OTHER_ORG = "org-b"


def _ok(ctx: JobContext) -> Mapping[str, Any]:
    return {"site": ctx.payload.get("site")}


def rate_registry() -> Registry:
    registry = Registry("rates")
    # a crawler's politeness: 3 fetches per 10 s per site (per org)
    registry.register(JobType("polite", _ok, concurrency_key="site", rate_limit=(3, 10)))
    # an upstream's quota shared by every org: 2 calls per 60 s per account
    registry.register(
        JobType(
            "quota",
            _ok,
            concurrency_key="site",
            concurrency_scope=KeyScope.GLOBAL,
            rate_limit=(2, 60),
        )
    )
    # both limits on one key: 1 running and 3 starts per 10 s per site
    registry.register(
        JobType("both", _ok, concurrency_key="site", concurrency_limit=1, rate_limit=(3, 10))
    )
    # no key field: 2 starts per 30 s per org
    registry.register(JobType("per_org", _ok, rate_limit=(2, 30)))
    registry.register(JobType("plain", _ok))
    return registry


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return JobService(store, rate_registry(), clock)


def _done(service: JobService, jobs: list[Job]) -> None:
    for job in jobs:
        assert service.complete(job.ref, Done()) is not None


def _sites(jobs: list[Job]) -> Counter[Any]:
    return Counter(j.payload.get("site") for j in jobs)


def test_a_key_starts_at_most_n_jobs_per_window(service: JobService, clock: FakeClock) -> None:
    service.enqueue_many(ORG, "polite", [{"site": 1}] * 10)
    first = service.claim(10)
    assert len(first) == 3
    _done(service, first)  # ending them frees no start: the window does
    assert service.claim(10) == []
    clock.advance(9.999)
    assert service.claim(10) == []
    queued = service.list_jobs(ORG, JobFilter(statuses=frozenset({Status.QUEUED})))
    assert len(queued) == 7
    assert all(j.attempts == 0 for j in queued)  # passed over, no attempt spent
    clock.advance(0.001)  # 10 s after the first starts: they leave the window
    assert len(service.claim(10)) == 3


def test_the_window_slides_with_each_start(service: JobService, clock: FakeClock) -> None:
    """Not a fixed window: each start leaves it P seconds after it was made, so no window of P
    seconds, wherever it is placed, holds more than N starts."""
    service.enqueue_many(ORG, "polite", [{"site": 1}] * 10)
    assert len(service.claim(2)) == 2  # t = 0
    clock.advance(5)
    assert len(service.claim(10)) == 1  # t = 5: the third
    clock.advance(4.9)
    assert service.claim(10) == []  # t = 9.9: three in (-0.1, 9.9]
    clock.advance(0.1)
    assert len(service.claim(10)) == 2  # t = 10: the two of t = 0 left
    clock.advance(4.9)
    assert service.claim(10) == []  # t = 14.9
    clock.advance(0.1)
    assert len(service.claim(10)) == 1  # t = 15: the one of t = 5 left


def test_keys_are_independent_and_per_org_unless_global(
    service: JobService, clock: FakeClock
) -> None:
    for org in (ORG, OTHER_ORG):
        service.enqueue_many(org, "polite", [{"site": 1}] * 5 + [{"site": 2}] * 5)
        service.enqueue_many(org, "quota", [{"site": "acct"}] * 5)
    claimed = service.claim(100)
    polite = Counter((j.org_id, j.payload["site"]) for j in claimed if j.type == "polite")
    assert polite == {(ORG, 1): 3, (ORG, 2): 3, (OTHER_ORG, 1): 3, (OTHER_ORG, 2): 3}
    assert sum(j.type == "quota" for j in claimed) == 2  # one account for every org
    assert service.claim(100) == []


def test_a_type_without_a_key_field_is_limited_per_org(
    service: JobService, clock: FakeClock
) -> None:
    for org in (ORG, OTHER_ORG):
        service.enqueue_many(org, "per_org", [{"n": i} for i in range(4)])
    claimed = service.claim(100)
    assert Counter(j.org_id for j in claimed) == {ORG: 2, OTHER_ORG: 2}
    clock.advance(30)
    assert Counter(j.org_id for j in service.claim(100)) == {ORG: 2, OTHER_ORG: 2}


def test_a_spent_key_never_holds_back_another_or_an_unlimited_type(
    service: JobService, clock: FakeClock
) -> None:
    service.enqueue_many(ORG, "polite", [{"site": "busy"}] * 3)
    assert len(service.claim(3)) == 3
    service.enqueue_many(ORG, "polite", [{"site": "busy"}] * 500, priority=5)
    clock.advance(1)
    other = service.enqueue(ORG, "polite", {"site": "idle"}).job
    plain = service.enqueue(ORG, "plain", {}).job
    claimed = service.claim(2)
    assert {j.id for j in claimed} == {other.id, plain.id}


def test_composed_with_a_concurrency_limit_on_the_same_key(
    service: JobService, clock: FakeClock
) -> None:
    service.enqueue_many(ORG, "both", [{"site": 1}] * 6)
    started = 0
    for _ in range(5):
        claimed = service.claim(10)
        assert len(claimed) <= 1  # one running at a time
        started += len(claimed)
        _done(service, claimed)
        clock.advance(1)
    assert started == 3  # and three starts per 10 s
    clock.advance(5)  # t = 10: the first start left the window
    assert len(service.claim(10)) == 1


def test_priorities_order_the_starts_a_key_has_left(service: JobService, clock: FakeClock) -> None:
    low = service.enqueue_many(ORG, "polite", [{"site": 1}] * 3, priority=-1)
    clock.advance(1)
    high = service.enqueue_many(ORG, "polite", [{"site": 1}] * 3, priority=3)
    first = service.claim(10)
    assert {j.id for j in first} == {j.id for j in high}
    clock.advance(10)
    assert {j.id for j in service.claim(10)} == {j.id for j in low}


def test_every_start_counts_a_retry_or_a_snooze_too(service: JobService, clock: FakeClock) -> None:
    service.enqueue_many(ORG, "polite", [{"site": 1}] * 3)
    (job,) = service.claim(1)
    assert service.complete(job.ref, Requeue(run_at=clock.now(), snooze=True)) is not None
    assert len(service.claim(10)) == 2  # the snoozed run counted: 1 + 2 = 3 starts
    assert service.claim(10) == []
    clock.advance(10)
    assert len(service.claim(10)) == 1  # the third job, started 10 s after the first start


def test_the_claim_sent_with_outcomes_keeps_the_rate(service: JobService, clock: FakeClock) -> None:
    service.enqueue_many(ORG, "polite", [{"site": 1}] * 8)
    first = service.claim(2)
    _finished, claimed = service.complete_and_claim([(j.ref, Done()) for j in first], 10)
    assert len(claimed) == 1
    _finished, claimed = service.complete_and_claim([(claimed[0].ref, Done())], 10)
    assert claimed == []


def test_in_fair_order_between_orgs_too(store: JobStore, clock: FakeClock) -> None:
    fair = JobService(store, rate_registry(), clock, fair_claim=True)
    service_plain = JobService(store, rate_registry(), clock, fair_claim=False)
    fair.enqueue_many(ORG, "polite", [{"site": 1}] * 6)
    clock.advance(1)
    fair.enqueue_many(OTHER_ORG, "polite", [{"site": 1}] * 6)
    claimed = fair.claim(1) + fair.claim(1)
    assert {j.org_id for j in claimed} == {ORG, OTHER_ORG}  # each org's head in turn
    rest = fair.claim(100) + service_plain.claim(100)
    assert Counter(j.org_id for j in claimed + rest) == {ORG: 3, OTHER_ORG: 3}


def test_concurrent_claimers_never_exceed_the_rate(store: JobStore, clock: FakeClock) -> None:
    """Eight claimers at once (threads, each call its own connection on PostgreSQL), the clock
    still: every key starts exactly N jobs, never more."""
    service = JobService(store, rate_registry(), clock)
    service.enqueue_many(ORG, "polite", [{"site": i % 4} for i in range(80)])
    service.enqueue_many(ORG, "plain", [{"n": i} for i in range(20)])
    claimed: list[Job] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def claimer() -> None:
        barrier.wait()
        for _ in range(6):
            got = service.claim(3)
            with lock:
                claimed.extend(got)

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert _sites([j for j in claimed if j.type == "polite"]) == {0: 3, 1: 3, 2: 3, 3: 3}
    assert sum(j.type == "plain" for j in claimed) == 20
    assert len({j.id for j in claimed}) == len(claimed)


def test_why_a_job_is_rate_limited(service: JobService, clock: FakeClock) -> None:
    service.enqueue_many(ORG, "polite", [{"site": 1}] * 3)
    (first,) = service.claim(1)
    clock.advance(4)
    (second,) = service.claim(1)
    clock.advance(1)
    (third,) = service.claim(1)
    held = service.enqueue(ORG, "polite", {"site": 1}).job
    reasons = service.why_waiting(held)
    limited = [r for r in reasons if r.code == "rate_limited"]
    assert len(limited) == 1
    next_at = first.started_at
    assert next_at is not None
    expected = (next_at + timedelta(seconds=10)).isoformat(timespec="milliseconds")
    assert limited[0].message.startswith(f"rate limited: next start at {expected}")
    assert "site=1" in limited[0].message
    clock.advance(5)  # t = 10: the first start left the window
    assert "rate_limited" not in {r.code for r in service.why_waiting(held)}
    assert [j.id for j in service.claim(5)] == [held.id]
    assert second.id != third.id
