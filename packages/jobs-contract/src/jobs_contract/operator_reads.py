"""The operator reads of the port (``get_any_org``, ``list_all_orgs``): what the CLI's ``jobs
show ID`` and ``jobs ls`` without ``--org`` ask, one read each, the same on every adapter. They
are the only reads that cross orgs; every org-scoped read keeps its org (the store contract)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import pytest
from jobs_core import Done, FakeClock, JobFilter, JobNotFound, JobService, JobStore, Status
from jobs_core.observe import active_state

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, service_for

ORGS = ("org-a", "org-b", "org-c")


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    """The use cases over the store under test."""
    return service_for(store, clock)


def test_get_any_org_finds_a_job_of_every_org_and_nothing_else(
    service: JobService, clock: FakeClock
) -> None:
    made = [service.enqueue(org, "crawl", {"org": org}).job for org in ORGS]
    running = claim_one(service)
    for job in made:
        found = service.store.get_any_org(job.id)
        assert found == service.get(job.org_id, job.id)
        assert found is not None
        assert found.org_id == job.payload["org"]
    assert service.get_any_org(running.id).status is Status.RUNNING
    assert service.store.get_any_org(uuid.uuid4()) is None
    with pytest.raises(JobNotFound):
        service.get_any_org(uuid.uuid4())


def test_list_all_orgs_is_every_org_newest_first_filtered_and_paged(
    service: JobService, clock: FakeClock
) -> None:
    for i in range(9):
        service.enqueue(ORGS[i % 3], "reconcile" if i % 2 else "crawl", {"i": i})
        if i % 3 == 2:
            clock.advance(1)  # three jobs per instant: the id orders those of one instant
    everything = service.list_all_orgs(JobFilter(limit=100))
    assert len(everything) == 9
    assert {j.org_id for j in everything} == set(ORGS)
    keys = [(j.created_at, j.id) for j in everything]
    assert keys == sorted(keys, reverse=True)
    # the same jobs as the org-scoped reads, merged
    per_org = [j for org in ORGS for j in service.list_jobs(org, JobFilter(limit=100))]
    assert sorted(j.id for j in per_org) == sorted(j.id for j in everything)

    page1 = service.list_all_orgs(JobFilter(limit=4))
    last = page1[-1]
    page2 = service.list_all_orgs(JobFilter(limit=4, before=(last.created_at, last.id)))
    page3 = service.list_all_orgs(JobFilter(limit=4, before=(page2[-1].created_at, page2[-1].id)))
    assert [j.id for j in page1 + page2 + page3] == [j.id for j in everything]
    assert len(page3) == 1

    crawls = service.list_all_orgs(JobFilter(type="crawl", limit=100))
    assert [j.id for j in crawls] == [j.id for j in everything if j.type == "crawl"]
    assert sorted(j.payload["i"] for j in crawls) == [0, 2, 4, 6, 8]
    first = claim_one(service)
    running = service.list_all_orgs(JobFilter(statuses=frozenset({Status.RUNNING})))
    assert [j.id for j in running] == [first.id]
    both = JobFilter(statuses=frozenset({Status.QUEUED, Status.RUNNING}), type="reconcile")
    reconciles = [j.id for j in everything if j.type == "reconcile"]
    assert [j.id for j in service.list_all_orgs(both)] == reconciles
    assert len(reconciles) == 4
    assert service.list_all_orgs(JobFilter(limit=0)) == []
    assert service.list_all_orgs(JobFilter(type="no-such-type")) == []


def test_active_counts_count_live_jobs_by_type_and_state(
    service: JobService, clock: FakeClock
) -> None:
    """The gauges' read: queued (due), scheduled (due later), running; never a finished job."""
    for org in ORGS:
        service.enqueue(org, "crawl", {"org": org})
    service.enqueue("org-a", "reconcile", run_at=clock.now() + timedelta(hours=1))
    service.enqueue("org-b", "reconcile")
    done = service.enqueue("org-c", "boom").job
    claimed = {job.id: job for job in service.claim(10, ["boom"])}
    service.complete(claimed[done.id].ref, Done())
    service.claim(1, ["crawl"])
    now = clock.now()
    expected = Counter(
        (job.type, state)
        for job in service.list_all_orgs(JobFilter(limit=100))
        if (state := active_state(job, now)) is not None
    )
    assert service.store.active_counts(now) == dict(expected)
    assert service.store.active_counts(now) == {
        ("crawl", "queued"): 2,
        ("crawl", "running"): 1,
        ("reconcile", "queued"): 1,
        ("reconcile", "scheduled"): 1,
    }
    later = now + timedelta(hours=2)
    assert service.store.active_counts(later)[("reconcile", "queued")] == 2
