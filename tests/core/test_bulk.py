"""Bulk actions (jobs_core.bulk): each job through its single-job use case, a report of every
outcome and every skipped id with why, another org's ids skipped exactly as absent ones."""

from __future__ import annotations

import uuid

import pytest
from jobs_contract.helpers import claim_one, make_registry
from jobs_core import FakeClock, InMemoryJobStore, JobService, Status
from jobs_core.bulk import (
    DEFAULT_LIMIT,
    MAX_IDS,
    MAX_LIMIT,
    BulkAction,
    Selection,
    Skip,
    run_bulk,
)
from jobs_core.domain import Failed
from jobs_core.quotas import Quota, QuotaExceeded

ORG = "org-a"


@pytest.fixture
def service() -> JobService:
    return JobService(InMemoryJobStore(), make_registry(), FakeClock())


def _failed(service: JobService, n: int, org: str = ORG) -> list[uuid.UUID]:
    ids = []
    for _ in range(n):
        job = service.enqueue(org, "boom").job
        service.complete(claim_one(service).ref, Failed(error="broke"))
        ids.append(job.id)
    return ids


def test_retry_by_ids_retries_the_failed_and_skips_the_rest_with_why(service: JobService) -> None:
    failed = _failed(service, 2)
    queued = service.enqueue(ORG, "reconcile").job.id
    foreign = _failed(service, 1, org="org-b")[0]
    absent = uuid.uuid4()
    report = run_bulk(
        service, ORG, BulkAction.RETRY, Selection(ids=(*failed, queued, foreign, absent))
    )
    assert report.done == {"retried": 2}
    assert report.matched == 3
    skipped = {s.id: s.reason for s in report.skipped}
    assert skipped == {queued: Skip.WRONG_STATUS, foreign: Skip.NOT_FOUND, absent: Skip.NOT_FOUND}
    # Another org's job: the same answer as an absent id, and left as it was.
    details = {s.id: s.detail for s in report.skipped}
    assert details[foreign] == details[absent]
    assert service.get("org-b", foreign).status is Status.FAILED
    assert all(service.get(ORG, i).status is Status.QUEUED for i in failed)


def test_a_dry_run_counts_and_changes_nothing(service: JobService) -> None:
    failed = _failed(service, 3)
    service.enqueue(ORG, "reconcile")
    selection = Selection(statuses=frozenset({Status.FAILED}))
    dry = run_bulk(service, ORG, BulkAction.RETRY, selection, dry_run=True)
    assert dry.dry_run
    assert dry.done == {"retried": 3}
    assert dry.matched == 3
    assert not dry.more
    assert all(service.get(ORG, i).status is Status.FAILED for i in failed)
    real = run_bulk(service, ORG, BulkAction.RETRY, selection)
    assert real.done == dry.done


def test_a_filter_acts_on_at_most_limit_jobs_newest_first_and_says_more(
    service: JobService,
) -> None:
    for _ in range(5):
        service.enqueue(ORG, "reconcile")
    report = run_bulk(service, ORG, BulkAction.CANCEL, Selection(type="reconcile", limit=3))
    assert report.done == {"cancelled": 3}
    assert report.more
    assert service.stats(ORG)[Status.QUEUED] == 2


def test_cancel_asks_a_running_job_to_stop(service: JobService) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    report = run_bulk(service, ORG, BulkAction.CANCEL, Selection(ids=(running.id,)))
    assert report.done == {"cancel_requested": 1}
    assert service.get(ORG, running.id).cancel_requested_at is not None


def test_delete_skips_live_and_protected_jobs(service: JobService) -> None:
    [failed] = _failed(service, 1)
    live = service.enqueue(ORG, "reconcile").job.id
    kept = service.enqueue(ORG, "history").job
    service.cancel(ORG, kept.id)
    ids = (failed, live, kept.id)
    dry = run_bulk(service, ORG, BulkAction.DELETE, Selection(ids=ids), dry_run=True)
    real = run_bulk(service, ORG, BulkAction.DELETE, Selection(ids=ids))
    for report in (dry, real):
        assert report.done == {"deleted": 1}
        assert {s.id: s.reason for s in report.skipped} == {
            live: Skip.WRONG_STATUS,
            kept.id: Skip.PROTECTED,
        }
    assert service.store.get(ORG, failed) is None


def test_a_quota_refusal_stops_the_retries_after_it(service: JobService) -> None:
    failed = _failed(service, 3)
    calls = 0

    def admit() -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise QuotaExceeded(Quota.QUEUED_JOBS, "too many queued jobs", limit=1)

    report = run_bulk(service, ORG, BulkAction.RETRY, Selection(ids=tuple(failed)), admit=admit)
    assert report.done == {"retried": 1}
    assert [s.reason for s in report.skipped] == [Skip.QUOTA_EXCEEDED] * 2


def test_the_limits_are_checked_with_what_to_do() -> None:
    assert Selection().limit == DEFAULT_LIMIT
    with pytest.raises(ValueError, match="1 to 1000 ids"):
        Selection(ids=())
    with pytest.raises(ValueError, match="1 to 1000 ids"):
        Selection(ids=tuple(uuid.uuid4() for _ in range(MAX_IDS + 1)))
    with pytest.raises(ValueError, match="limit is 1 to 1000"):
        Selection(limit=MAX_LIMIT + 1)
    with pytest.raises(ValueError, match="not both"):
        Selection(ids=(uuid.uuid4(),), type="x")
