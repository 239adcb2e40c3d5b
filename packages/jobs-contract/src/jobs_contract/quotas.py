"""``jobs_contract.quotas``: the quota store port (:class:`jobs_core.quotas.QuotaStore`,
decision 0033): the operators' overrides kept and merged, the queued count of one org stopped at
its cap, the use of every org, and the enqueue admission of :class:`QuotaService` on top.

The adapter provides ``jobs_quota_store``: the quota store that sees the jobs of the suite's
``store`` (its schedules, if it has any, are not exercised here)."""

from __future__ import annotations

import pytest
from jobs_core import FakeClock, JobService, JobStore
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import (
    DEFAULT_QUOTAS,
    OrgUsage,
    Quota,
    QuotaExceeded,
    QuotaOverride,
    Quotas,
    QuotaStore,
)

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, service_for


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    """The use cases over the store under test."""
    return service_for(store, clock)


@pytest.fixture
def quotas(jobs_quota_store: QuotaStore, clock: FakeClock) -> QuotaService:
    """Quotas of 3 queued jobs and 2 jobs per second (bursts of 2), re-read every second."""
    for override in jobs_quota_store.overrides():  # an adapter keeps them across tests
        jobs_quota_store.clear_override(override.org_id)
    return QuotaService(
        jobs_quota_store, Quotas(max_queued=3, enqueue_rate=2, enqueue_burst=2), clock
    )


def test_an_override_is_kept_merged_listed_and_cleared(
    quotas: QuotaService, clock: FakeClock
) -> None:
    store = quotas.store
    assert store.get_override("org-a") is None
    set_a = quotas.set_override("org-a", {"max_queued": 50}, by="ops")
    assert (set_a.max_queued, set_a.updated_by, set_a.updated_at) == (50, "ops", clock.now())
    clock.advance(1)
    quotas.set_override("org-a", {"enqueue_rate": 0.5}, by="cli")  # merged with the first
    quotas.set_override("org-b", {"min_schedule_interval_s": 1}, by="cli")
    got = store.get_override("org-a")
    assert got is not None
    assert (got.max_queued, got.enqueue_rate, got.max_schedules) == (50, 0.5, None)
    assert got.updated_at == clock.now()
    assert [o.org_id for o in store.overrides()] == ["org-a", "org-b"]
    merged = quotas.quotas_of("org-a")
    assert (merged.max_queued, merged.enqueue_rate, merged.enqueue_burst) == (50, 0.5, 2)
    assert quotas.quotas_of("org-c") == quotas.defaults
    # back to the default field by field; an override that changes nothing is no override
    quotas.set_override("org-b", {"min_schedule_interval_s": None}, by="cli")
    assert store.get_override("org-b") is None
    assert quotas.clear_override("org-a") is True
    assert quotas.clear_override("org-a") is False
    assert store.overrides() == []
    with pytest.raises(ValueError, match="max_queued"):
        quotas.set_override("org-a", {"max_queued": -1}, by="cli")
    with pytest.raises(ValueError, match="unknown quota"):
        quotas.set_override("org-a", {"max_jobs": 1}, by="cli")
    assert store.set_override(QuotaOverride("org-z"), clock.now()).empty


def test_the_queued_count_is_one_orgs_queued_jobs_stopped_at_the_cap(
    service: JobService, jobs_quota_store: QuotaStore
) -> None:
    for i in range(5):
        service.enqueue("org-a", "reconcile", {"i": i})
    service.enqueue("org-b", "reconcile", {"i": 0})
    claim_one(service)  # org-a's oldest is running: not queued
    assert jobs_quota_store.queued_count("org-a", 100) == 4
    assert jobs_quota_store.queued_count("org-a", 2) == 2
    assert jobs_quota_store.queued_count("org-b", 100) == 1
    assert jobs_quota_store.queued_count("org-c", 100) == 0
    assert jobs_quota_store.usage(None) == [OrgUsage("org-a", 4), OrgUsage("org-b", 1)]
    assert jobs_quota_store.usage(["org-c", "org-b"]) == [OrgUsage("org-b", 1), OrgUsage("org-c")]


def test_an_enqueue_over_the_queued_quota_is_refused_until_jobs_start(
    service: JobService, quotas: QuotaService, clock: FakeClock
) -> None:
    for i in range(3):
        quotas.admit("org-a")
        service.enqueue("org-a", "reconcile", {"i": i})
        clock.advance(1)  # the bucket refills; the count is taken again
    with pytest.raises(QuotaExceeded) as refused:
        quotas.admit("org-a")
    assert refused.value.quota is Quota.QUEUED_JOBS
    assert (refused.value.limit, refused.value.used, refused.value.retry_after_s) == (3, 3, 1)
    assert "queued jobs" in str(refused.value)
    quotas.admit("org-b")  # another org is not held back
    claim_one(service)
    with pytest.raises(QuotaExceeded):
        quotas.admit("org-a")  # this process trusts its count for refresh_s
    clock.advance(1)
    quotas.admit("org-a")  # counted again: one job has started
    with pytest.raises(QuotaExceeded):
        quotas.admit("org-a")  # this process counts what it admitted since
    clock.advance(1)
    quotas.set_override("org-a", {"max_queued": 10}, by="ops")
    quotas.admit("org-a")


def test_an_enqueue_faster_than_the_rate_is_refused_until_the_bucket_refills(
    quotas: QuotaService, clock: FakeClock
) -> None:
    quotas.admit("org-a")
    quotas.admit("org-a")
    with pytest.raises(QuotaExceeded) as refused:
        quotas.admit("org-a")
    assert refused.value.quota is Quota.ENQUEUE_RATE
    assert refused.value.retry_after_s == 1
    clock.advance(0.5)  # one token back at 2 per second
    quotas.admit("org-a")
    with pytest.raises(QuotaExceeded):
        quotas.admit("org-a")
    quotas.admit("org-b")


def test_quotas_off_admit_everything(jobs_quota_store: QuotaStore, clock: FakeClock) -> None:
    off = QuotaService(jobs_quota_store, Quotas(max_queued=0), clock, enabled=False)
    for _ in range(DEFAULT_QUOTAS.enqueue_burst + 1):
        off.admit("org-a")
    assert off.of("org-a").quotas.max_queued == 0
