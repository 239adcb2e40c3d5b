"""Bounded lists (``JobFilter.field_bytes``, ``jobs_core.listing``): every adapter leaves out
the same values of a listed job, those whose JSON text is larger than the bound, as
``Elided(size)``, and keeps the others whole; a read of the job alone is whole.

A job's children (decision 0045): ``JobFilter.parent_id`` lists only them, with the other
filters and the cursor; ``children_counts`` counts them and those ended for the ids of a page,
in the org only."""

from __future__ import annotations

import uuid

import pytest
from jobs_core import Done, FakeClock, Job, JobFilter, JobService, JobStore, Status
from jobs_core.listing import ChildCounts, Elided, elided_fields, json_bytes

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, finish, handler_context, service_for

ORG = "org-a"
BOUND = 1000


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return service_for(store, clock)


def test_a_bounded_list_leaves_out_the_values_past_the_bound(
    service: JobService, clock: FakeClock
) -> None:
    small = {"site": "a\u00e9", "n": [1, 2.5, None, True]}
    large = {"blob": "\u00e9" * 600}  # 600 characters, 1,200 bytes of UTF-8
    assert json_bytes(small) < BOUND < json_bytes(large)
    service.enqueue(ORG, "crawl", small)
    running = claim_one(service)  # the only queued job
    service.store.save_progress(running.ref, large, running.run_at)
    clock.advance(1)
    assert finish(service.store, running.ref, Done(small), clock.now()) is not None
    kept = service.enqueue(ORG, "crawl", {"site": "b"}).job
    cut = service.enqueue(ORG, "reconcile", large).job

    listed = {job.id: job for job in service.list_jobs(ORG, JobFilter(field_bytes=BOUND))}
    assert listed[kept.id].payload == {"site": "b"}
    assert elided_fields(listed[kept.id]) == []
    assert listed[cut.id].payload == Elided(json_bytes(large))
    assert elided_fields(listed[cut.id]) == ["payload"]
    done = listed[running.id]
    whole_progress = service.get(ORG, running.id).progress  # with the heartbeat's stamp
    assert done.progress == Elided(json_bytes(whole_progress))
    assert elided_fields(done) == ["progress"]
    assert (done.payload, done.report) == (small, small)

    whole = service.list_jobs(ORG, JobFilter())
    assert all(elided_fields(job) == [] for job in whole)
    assert service.get(ORG, cut.id).payload == large


def _parent(
    service: JobService, clock: FakeClock, org: str, site: str, children: int, *, now: int = 0
) -> Job:
    """A ``crawl`` of ``org`` that enqueued ``children`` reconciles with its done outcome (and
    ``now`` more at once, ``immediately``); the crawl is the only one queued when it is made."""
    service.enqueue(org, "crawl", {"site": site})
    [held] = service.claim(1, ["crawl"])
    ctx = handler_context(service, held, clock)
    ctx.enqueue_many("reconcile", [{"site": site, "n": n} for n in range(children)])
    for n in range(now):
        ctx.enqueue("reconcile", {"site": site, "now": n}, immediately=True)
    clock.advance(1)
    done = finish(service.store, held.ref, Done(None, ctx.children), clock.now())
    assert done is not None
    return done


def test_the_children_of_a_job_are_listed_and_counted_in_its_org_only(
    service: JobService, clock: FakeClock
) -> None:
    first = _parent(service, clock, ORG, "a", 3)
    # Two of its children end: one runs and is done, one is cancelled while queued.
    [running] = service.claim(1, ["reconcile"])  # only the first's children are queued
    clock.advance(1)
    assert finish(service.store, running.ref, Done(None), clock.now()) is not None
    queued = [k for k in service.list_jobs(ORG, JobFilter()) if k.status is Status.QUEUED]
    service.cancel(ORG, queued[0].id)
    second = _parent(service, clock, ORG, "b", 1, now=1)
    foreign = _parent(service, clock, "org-b", "c", 2)
    service.enqueue(ORG, "reconcile", {"site": "no parent"})

    kids = service.list_jobs(ORG, JobFilter(parent_id=first.id))
    assert [k.payload["n"] for k in kids] == [2, 1, 0]  # newest first, as every list
    assert all(k.parent_id == first.id and k.org_id == ORG for k in kids)
    assert sorted(k.status for k in kids) == sorted([Status.DONE, Status.CANCELLED, Status.QUEUED])
    assert len(service.list_jobs(ORG, JobFilter(parent_id=second.id))) == 2
    # One org never reads another's children, listed or counted.
    assert service.list_jobs(ORG, JobFilter(parent_id=foreign.id)) == []
    assert len(service.list_jobs("org-b", JobFilter(parent_id=foreign.id))) == 2
    assert len(service.list_all_orgs(JobFilter(parent_id=foreign.id))) == 2

    asked = [first.id, second.id, foreign.id, kids[0].id]
    counts = service.store.children_counts(ORG, asked)
    assert counts == {first.id: ChildCounts(3, 2), second.id: ChildCounts(2, 0)}
    assert service.store.children_counts("org-b", asked) == {foreign.id: ChildCounts(2, 0)}
    assert service.store.children_counts(ORG, []) == {}
    assert service.store.children_counts(ORG, [uuid.uuid4(), first.id, first.id]) == {
        first.id: ChildCounts(3, 2)
    }


def test_a_childrens_list_takes_the_other_filters_and_the_cursor(
    service: JobService, clock: FakeClock
) -> None:
    parent = _parent(service, clock, ORG, "a", 5)
    _parent(service, clock, ORG, "b", 2)
    every = service.list_jobs(ORG, JobFilter(parent_id=parent.id))
    assert len(every) == 5
    page = service.list_jobs(ORG, JobFilter(parent_id=parent.id, limit=2))
    assert page == every[:2]
    last = page[-1]
    after = service.list_jobs(
        ORG, JobFilter(parent_id=parent.id, limit=10, before=(last.created_at, last.id))
    )
    assert after == every[2:]
    service.cancel(ORG, every[0].id)
    cancelled = JobFilter(parent_id=parent.id, statuses=frozenset({Status.CANCELLED}))
    assert [j.id for j in service.list_jobs(ORG, cancelled)] == [every[0].id]
    assert service.list_jobs(ORG, JobFilter(parent_id=parent.id, type="crawl")) == []
    assert service.list_jobs(ORG, JobFilter(parent_id=every[0].id)) == []  # a child of none
