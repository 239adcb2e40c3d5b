"""Fairness between orgs on every adapter (docs/flow-control.md "Fairness between orgs"): with
``fair_claim`` on, one org's backlog holds another org's job for at most as many claims as
there are orgs with due jobs, and the claim keeps its other guarantees (priority first,
``run_at``, the type filter, no job to two claimers)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from jobs_core import Done, FakeClock, JobContext, JobService, JobStore, JobType, Registry
from jobs_core.flow import FairTurn, fair_order, next_turn
from jobs_core.memory import InMemoryJobStore

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)

BACKLOG = 300  # org A's queued jobs; the bound does not depend on it (see the bench for 100,000)


def _ok(ctx: JobContext) -> Mapping[str, Any]:
    return {}


def registry(*, limited: bool = False) -> Registry:
    """``limited``: one more type declares a key limit, so every claim takes the limits path."""
    reg = Registry("fair")
    reg.register(JobType("work", _ok))
    reg.register(JobType("other", _ok))
    if limited:
        reg.register(JobType("crawl", _ok, concurrency_key="site_id", concurrency_limit=2))
    return reg


def fair(
    store: JobStore, clock: FakeClock, *, on: bool = True, limited: bool = False
) -> JobService:
    return JobService(store, registry(limited=limited), clock, fair_claim=on)


def backlog(service: JobService, clock: FakeClock, org: str, n: int, **kw: Any) -> None:
    service.enqueue_many(org, "work", [{"i": i} for i in range(n)], **kw)
    clock.advance(1)


def test_plain_claim_makes_the_late_org_wait_behind_the_backlog(
    store: JobStore, clock: FakeClock
) -> None:
    service = fair(store, clock, on=False)
    backlog(service, clock, "org-a", BACKLOG)
    b = service.enqueue("org-b", "work", {}).job
    claims = 0
    while True:
        claims += 1
        if [j.id for j in service.claim(1)] == [b.id]:
            break
    assert claims == BACKLOG + 1  # the starvation the fair claim removes


def test_the_single_job_of_another_org_starts_within_two_claims(
    store: JobStore, clock: FakeClock
) -> None:
    service = fair(store, clock)
    backlog(service, clock, "org-a", BACKLOG)
    b = service.enqueue("org-b", "work", {}).job
    taken = [service.claim(1) for _ in range(2)]
    assert [len(t) for t in taken] == [1, 1]
    assert b.id in {t[0].id for t in taken}
    assert {t[0].org_id for t in taken} == {"org-a", "org-b"}


def test_orgs_take_turns_and_the_turn_survives_the_finish_and_claim(
    store: JobStore, clock: FakeClock
) -> None:
    service = fair(store, clock)
    for org in ("org-c", "org-a", "org-b"):
        backlog(service, clock, org, 20)
    orgs = []
    (job,) = service.claim(1)
    orgs.append(job.org_id)
    for _ in range(8):
        _, claimed = service.complete_and_claim([(job.ref, Done({}))], 1)
        (job,) = claimed
        orgs.append(job.org_id)
    assert orgs == ["org-a", "org-b", "org-c"] * 3


def test_a_claim_of_many_takes_every_org_head_first(store: JobStore, clock: FakeClock) -> None:
    service = fair(store, clock)
    backlog(service, clock, "org-a", 50)
    backlog(service, clock, "org-b", 2)
    backlog(service, clock, "org-c", 1)
    claimed = service.claim(5)
    assert Counter(j.org_id for j in claimed) == {"org-a": 3, "org-b": 1, "org-c": 1}


def test_priority_comes_before_fairness(store: JobStore, clock: FakeClock) -> None:
    service = fair(store, clock)
    backlog(service, clock, "org-a", 5, priority=5)
    service.enqueue("org-b", "work", {}, priority=0)
    backlog(service, clock, "org-a", 3)
    claimed = [service.claim(1)[0] for _ in range(5)]
    assert [(j.org_id, j.priority) for j in claimed] == [("org-a", 5)] * 5
    (sixth,) = service.claim(1)
    assert (sixth.org_id, sixth.priority) == ("org-b", 0)
    # a claim of many: the priority-5 jobs of org A before org B's priority-0 head
    service2 = fair(store, clock)
    backlog(service2, clock, "org-a", 2, priority=5)
    service2.enqueue("org-c", "work", {}, priority=0)
    assert [j.priority for j in service2.claim(3)] == [5, 5, 0]


def test_a_job_not_due_or_of_another_type_is_not_an_org_head(
    store: JobStore, clock: FakeClock
) -> None:
    service = fair(store, clock)
    backlog(service, clock, "org-a", 10)
    later = service.enqueue("org-b", "work", {}, run_at=clock.now() + timedelta(hours=1)).job
    service.enqueue("org-c", "other", {})
    only_work = [service.store.claim(1, clock.now(), ["work"], turn=FairTurn(None))[0]]
    only_work += store.claim(1, clock.now(), ["work"], turn=FairTurn("org-a"))
    assert {j.org_id for j in only_work} == {"org-a"}
    assert later.id not in {j.id for j in only_work}
    (other,) = store.claim(1, clock.now(), ["other"], turn=FairTurn("org-a"))
    assert other.org_id == "org-c"


def test_an_empty_queue_and_a_claim_of_nothing(store: JobStore, clock: FakeClock) -> None:
    service = fair(store, clock)
    assert service.claim(1) == []
    assert store.claim(0, clock.now(), None, turn=FairTurn(None)) == []
    assert store.claim(1, clock.now(), [], turn=FairTurn(None)) == []


def test_concurrent_fair_claimers_never_share_a_job(store: JobStore, clock: FakeClock) -> None:
    seed = fair(store, clock)
    for org in ("org-a", "org-b", "org-c", "org-d"):
        backlog(seed, clock, org, 60)
    taken: list[uuid.UUID] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def claimer() -> None:
        service = fair(store, clock)  # each claimer keeps its own turn, as a worker does
        try:
            while True:
                got = service.claim(3)
                if not got:
                    return
                with lock:
                    taken.extend(j.id for j in got)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claimer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert len(taken) == len(set(taken)) == 240


def test_under_limits_the_fair_claim_keeps_its_order_and_its_limits(
    store: JobStore, clock: FakeClock
) -> None:
    """Fairness composes with concurrency limits (decision 0027): a registry that declares a
    limit still claims each org's head first, and its limits hold."""
    service = fair(store, clock, limited=True)
    service.enqueue_many("org-a", "crawl", [{"site_id": f"s{i % 3}"} for i in range(30)])
    clock.advance(1)
    b = service.enqueue("org-b", "crawl", {"site_id": "s9"}).job
    running = service.claim(6)  # org A's head, org B's head, then org A's oldest: all fit
    assert b.id in {j.id for j in running}
    assert Counter(j.payload["site_id"] for j in running) == {"s0": 2, "s1": 2, "s2": 1, "s9": 1}
    more = service.claim(20)  # s0 and s1 are full: the one place left is s2's
    assert Counter(j.payload["site_id"] for j in more) == {"s2": 1}
    assert service.claim(20) == []


# ---- the rule itself (pure) -------------------------------------------------------------------


def test_next_turn_wraps_around_the_orgs() -> None:
    clock = FakeClock()
    jobs = []
    reg = registry()
    for org in ("b", "a", "c"):
        spec = reg.new_job(org, "work", {})
        jobs.append(spec)
    assert next_turn(FairTurn(None), []) == FairTurn(None)
    mem = InMemoryJobStore()
    made = [mem.insert(spec, clock.now()) for spec in jobs]
    real = [j for j in made if j is not None]
    assert next_turn(FairTurn("b"), real) == FairTurn("b")  # a, b wrapped; c is after b
    assert next_turn(FairTurn("b"), [j for j in real if j.org_id != "c"]) == FairTurn("b")
    assert next_turn(FairTurn("c"), real) == FairTurn("c")
    assert [j.org_id for j in fair_order(real, FairTurn("a"))] == ["b", "c", "a"]


@pytest.mark.parametrize("after", [None, "a", "m", "z"])
def test_fair_order_is_a_permutation_that_keeps_priorities_first(after: str | None) -> None:
    clock = FakeClock()
    mem = InMemoryJobStore()
    reg = registry()
    for i, org in enumerate("abcabcaaz"):
        mem.insert(reg.new_job(org, "work", {}, priority=i % 3), clock.now())
        clock.advance(1)
    due = mem.claim(100, clock.now())  # claim order
    ordered = fair_order(due, FairTurn(after))
    assert sorted(j.id for j in ordered) == sorted(j.id for j in due)
    assert [j.priority for j in ordered] == sorted((j.priority for j in due), reverse=True)
