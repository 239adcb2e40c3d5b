"""Jobs that wait for others, on every adapter (decision 0041, docs/flows.md): a job enqueued
with ``depends_on`` waits, unclaimable, until those jobs end; then it is queued, or cancelled when
one of them did not end done and its type does not say ``after_failed_dependency="run"``. A
batch's callback waits for every member and runs whatever their ends, once. Each end counts once
per waiter, whichever write ended the job (a finish, a cancel, a sweep, a release)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import (
    DependencyInvalid,
    FakeClock,
    Job,
    JobService,
    JobStore,
    JobType,
    Registry,
    Status,
    domain,
)
from jobs_core.domain import Done, Failed
from jobs_core.errors import DedupConflict, InvalidTransition, JobNotFound

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)

ORG = "org-a"
OTHER = "org-b"


def _registry() -> Registry:
    registry = Registry("waits")

    def ok(ctx: Any) -> Mapping[str, Any]:
        return {"ok": True}

    registry.register(JobType("step", ok))
    registry.register(JobType("report", ok, after_failed_dependency="run"))
    registry.register(JobType("summary", ok))
    return registry


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return JobService(store, _registry(), clock)


def _end(service: JobService, job: Job, outcome: Done | Failed | None = None) -> Job:
    """Claim ``job`` (it must be the next due) and end its attempt with ``outcome``."""
    [held] = service.claim(1, [job.type])
    assert held.id == job.id
    ended = service.complete(held.ref, outcome or Done(report={"ok": True}))
    assert ended is not None
    return ended


def _status(service: JobService, job: Job) -> Status:
    return service.get(job.org_id, job.id).status


def test_a_dependent_waits_and_is_never_claimed_until_its_dependencies_end(
    service: JobService,
) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    b = service.enqueue(ORG, "step", {"n": 2}).job
    after = service.enqueue_after(ORG, "summary", {}, [a.id, b.id])
    assert after.status is Status.WAITING
    assert service.store.get(ORG, after.id) == after
    assert service.release_waiting() == []  # nothing ended yet

    _end(service, a)
    assert [j.id for j in service.release_waiting()] == []  # still waits for b
    assert _status(service, after) is Status.WAITING
    assert service.claim(10, ["summary"]) == []
    _end(service, b)
    [released] = service.release_waiting()
    assert released.id == after.id
    assert released.status is Status.QUEUED
    [claimed] = service.claim(10, ["summary"])
    assert claimed.id == after.id
    assert service.release_waiting() == []  # each end is taken once


def test_a_failed_dependency_cancels_its_dependent_and_says_which(service: JobService) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    b = service.enqueue(ORG, "step", {"n": 2}).job
    after = service.enqueue_after(ORG, "summary", {}, [a.id, b.id])
    _end(service, a, Failed(error="boom"))
    [cancelled] = service.release_waiting()
    assert cancelled.id == after.id
    assert cancelled.status is Status.CANCELLED
    assert cancelled.error == f"a job it depends on ended failed: {a.id}"
    assert cancelled.finished_at is not None
    assert service.claim(10, ["summary"]) == []


def test_a_type_that_runs_after_failures_waits_for_every_end(service: JobService) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    b = service.enqueue(ORG, "step", {"n": 2}).job
    after = service.enqueue_after(ORG, "report", {}, [a.id, b.id])
    _end(service, a, Failed(error="boom"))
    assert service.release_waiting() == []
    assert _status(service, after) is Status.WAITING
    service.cancel(ORG, b.id)  # a cancel while queued is an end too
    [released] = service.release_waiting()
    assert released.status is Status.QUEUED
    summary = service.awaited(ORG, after.id)
    assert [(j.id, j.status) for j in summary.jobs] == [
        (a.id, Status.FAILED),
        (b.id, Status.CANCELLED),
    ]
    assert summary.ended == 2


def test_dependencies_already_ended_decide_at_once(service: JobService) -> None:
    done = _end(service, service.enqueue(ORG, "step", {"n": 1}).job)
    assert service.enqueue_after(ORG, "summary", {}, [done.id]).status is Status.QUEUED
    failed = _end(service, service.enqueue(ORG, "step", {"n": 2}).job, Failed(error="x"))
    refused = service.enqueue_after(ORG, "summary", {"n": 3}, [failed.id])
    assert refused.status is Status.CANCELLED
    assert refused.error == f"a job it depends on ended failed: {failed.id}"
    assert service.enqueue_after(ORG, "report", {}, [failed.id]).status is Status.QUEUED


def test_an_end_counts_once_even_if_the_dependency_is_retried_and_ends_again(
    service: JobService,
) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    b = service.enqueue(ORG, "step", {"n": 2}).job
    after = service.enqueue_after(ORG, "report", {}, [a.id, b.id])
    _end(service, a, Failed(error="boom"))
    service.retry(ORG, a.id)
    _end(service, a)
    assert service.release_waiting() == []
    assert _status(service, after) is Status.WAITING  # b has not ended


def test_dependencies_must_be_jobs_of_the_org_and_nothing_is_written_otherwise(
    service: JobService,
) -> None:
    mine = service.enqueue(ORG, "step", {"n": 1}).job
    theirs = service.enqueue(OTHER, "step", {"n": 1}).job
    absent = uuid.uuid4()
    with pytest.raises(DependencyInvalid) as refused:
        service.enqueue_after(ORG, "summary", {}, [mine.id, theirs.id, absent])
    assert set(refused.value.missing) == {theirs.id, absent}
    assert [j.id for j in service.list_jobs(ORG, _all())] == [mine.id]
    with pytest.raises(DependencyInvalid, match="twice"):
        service.enqueue_after(ORG, "summary", {}, [mine.id, mine.id])
    with pytest.raises(DependencyInvalid, match="at least one"):
        service.enqueue_after(ORG, "summary", {}, [])


def test_a_waiting_job_can_be_cancelled_and_its_own_dependents_follow(
    service: JobService,
) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    middle = service.enqueue_after(ORG, "step", {"n": 2}, [a.id])
    last = service.enqueue_after(ORG, "summary", {}, [middle.id])
    cancelled = service.cancel(ORG, middle.id)
    assert cancelled.status is Status.CANCELLED
    [followed] = service.release_waiting()
    assert followed.id == last.id
    assert followed.status is Status.CANCELLED
    with pytest.raises(InvalidTransition):
        service.cancel(ORG, last.id)


def test_a_dependent_with_a_held_dedup_key_is_refused(service: JobService) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    service.enqueue(ORG, "summary", {}, dedup_key="daily")
    with pytest.raises(DedupConflict):
        service.enqueue_after(ORG, "summary", {}, [a.id], dedup_key="daily")


def test_a_batch_callback_runs_once_after_every_member_whatever_their_ends(
    service: JobService,
) -> None:
    batch = service.enqueue_batch(
        ORG, [("step", {"n": n}) for n in range(4)], ("summary", {"crawl": 7})
    )
    assert len(batch.members) == 4
    assert batch.callback.status is Status.WAITING
    outcomes: list[Done | Failed] = [Done(report={}), Failed(error="x"), Done(report={})]
    for member, outcome in zip(batch.members, outcomes, strict=False):
        _end(service, member, outcome)
        assert service.release_waiting() == []
    service.cancel(ORG, batch.members[3].id)
    [released] = service.release_waiting()
    assert released.id == batch.callback.id
    assert released.status is Status.QUEUED
    counts = service.awaited(ORG, batch.callback.id).counts
    assert (counts[Status.DONE], counts[Status.FAILED], counts[Status.CANCELLED]) == (2, 1, 1)
    _end(service, released)
    assert service.release_waiting() == []


def test_a_batch_is_written_whole_or_not_at_all(service: JobService) -> None:
    with pytest.raises(Exception, match="no-such-type"):
        service.enqueue_batch(ORG, [("step", {}), ("no-such-type", {})], ("summary", {}))
    assert service.list_jobs(ORG, _all()) == []
    with pytest.raises(DependencyInvalid, match="at least one"):
        service.enqueue_batch(ORG, [], ("summary", {}))


def test_the_awaited_of_another_orgs_job_is_not_found(service: JobService) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    after = service.enqueue_after(ORG, "summary", {}, [a.id])
    with pytest.raises(JobNotFound):
        service.awaited(OTHER, after.id)
    assert service.awaited(ORG, a.id).jobs == []


def test_the_end_hook_of_a_dependent_cancelled_by_its_dependency_is_due(
    store: JobStore, clock: FakeClock
) -> None:
    seen: list[Job] = []
    registry = _registry()
    registry.register(JobType("hooked", lambda ctx: None, on_cancel=seen.append))
    service = JobService(store, registry, clock)
    a = service.enqueue(ORG, "step", {"n": 1}).job
    after = service.enqueue_after(ORG, "hooked", {}, [a.id])
    _end(service, a, Failed(error="boom"))
    service.release_waiting()
    assert service.run_end_hooks() == 1
    assert [j.id for j in seen] == [after.id]
    assert domain.Status.CANCELLED is seen[0].status


def _all() -> Any:
    from jobs_core import JobFilter

    return JobFilter(limit=500)


def test_the_gauges_count_the_waiting_jobs(service: JobService, clock: FakeClock) -> None:
    a = service.enqueue(ORG, "step", {"n": 1}).job
    service.enqueue_after(ORG, "summary", {}, [a.id])
    counts = service.store.active_counts(clock.now())
    assert counts == {("step", "queued"): 1, ("summary", "waiting"): 1}
