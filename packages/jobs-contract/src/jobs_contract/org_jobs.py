"""The org's jobs' contract (:class:`jobs_core.ports.OrgJobs`): reads and admin actions scoped
to one org (cancel, retry, delete, lists, stats; docs/contract.md §2, §6), on every adapter."""

from __future__ import annotations

import uuid

import pytest
from jobs_core import (
    Cancelled,
    DedupConflict,
    FakeClock,
    InvalidTransition,
    JobFilter,
    JobNotFound,
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
from jobs_contract.helpers import claim_one, run_claimed

ORG = "org-a"
OTHER_ORG = "org-b"


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
