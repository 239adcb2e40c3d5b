"""The enqueue admission of :class:`jobs_core.quota_service.QuotaService` against the races of
a threaded API (issue 23): requests of one org on several threads read the clock a little
apart, and a count may begin while another ends. The rules of the bucket and the count hold
whatever order they come in (the in-memory store; the contract suite runs both stores)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from jobs_core import FakeClock, InMemoryJobStore
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import InMemoryQuotaStore, Quota, QuotaExceeded, Quotas


def _quotas(clock: FakeClock, **limits: float) -> QuotaService:
    store = InMemoryQuotaStore(InMemoryJobStore())
    return QuotaService(store, Quotas(**limits), clock)  # type: ignore[arg-type]


def test_a_thread_that_read_the_clock_earlier_never_refills_the_bucket() -> None:
    clock = FakeClock()
    quotas = _quotas(clock, enqueue_rate=1, enqueue_burst=2)
    later = clock.now()
    clock.set(later - timedelta(milliseconds=300))
    quotas.admit("org-a")  # its thread read the clock first...
    clock.set(later)
    quotas.admit("org-a")  # ...and this one filled the bucket after it
    clock.set(later - timedelta(milliseconds=200))  # a third read the clock between the two
    with pytest.raises(QuotaExceeded) as refused:
        quotas.admit("org-a")  # the bucket is not refilled by an earlier instant
    assert refused.value.quota is Quota.ENQUEUE_RATE


def test_a_clock_stepped_back_starts_the_bucket_afresh() -> None:
    clock = FakeClock()
    quotas = _quotas(clock, enqueue_rate=1, enqueue_burst=1)
    quotas.admit("org-a")
    clock.advance(-3600)  # the wall clock went back an hour: the org is not locked out
    quotas.admit("org-a")


def test_admitted_jobs_are_counted_until_the_next_count_and_not_after() -> None:
    clock = FakeClock()
    jobs = InMemoryJobStore()
    quotas = QuotaService(InMemoryQuotaStore(jobs), Quotas(max_queued=2), clock)
    quotas.admit("org-a")
    quotas.admit("org-a")  # admitted, not inserted: still counted by this process
    with pytest.raises(QuotaExceeded):
        quotas.admit("org-a")
    clock.advance(1)  # the count finds no job (none was inserted): room again
    assert quotas.room("org-a", 5) == 2
    assert quotas.room("org-a", 5) == 0
