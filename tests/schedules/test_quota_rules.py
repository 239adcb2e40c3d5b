"""The pure rules of the quotas per org (jobs_core.quotas, decision 0033): the shortest interval
of a cron expression, the quotas' own checks, an override merged over the defaults, and when an
org is near a quota (the cron library is the shipped adapter, cronsim)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from jobs_core.quotas import (
    OrgUsage,
    Quota,
    QuotaExceeded,
    QuotaOverride,
    Quotas,
    check_interval,
    near,
    override_from,
    shortest_interval,
)
from jobs_core.schedules import Schedule
from jobs_postgres.cron import CronsimCron

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # the eve of Europe/Paris's spring change


@pytest.mark.parametrize(
    ("cron", "zone", "seconds"),
    [
        ("* * * * * *", "UTC", 1),
        ("*/5 * * * * *", "UTC", 5),
        ("0,30 * * * * *", "UTC", 30),
        ("0 * * * * *", "UTC", 60),
        ("* * * * *", "UTC", 60),
        ("0,1 * * * *", "UTC", 60),  # a one-minute gap once an hour is still one minute
        ("*/5 * * * *", "UTC", 300),
        ("0 4 * * *", "UTC", 86_400),
        ("0 4 * * *", "Europe/Paris", 86_400 - 3_600),  # the spring change: a 23-hour day
        ("30 2 * * *", "Europe/Paris", 84_600),  # 02:30 skipped: fires at 03:00, 23.5 h later
    ],
)
def test_the_shortest_interval_of_an_expression(cron: str, zone: str, seconds: int) -> None:
    assert shortest_interval(cron, zone, CronsimCron(), NOW) == seconds


def test_a_schedule_more_frequent_than_the_orgs_minimum_is_refused_naming_the_quota() -> None:
    cron = CronsimCron()
    quotas = Quotas(min_schedule_interval_s=300)
    check_interval(Schedule("ok", "acme", "noop", "*/5 * * * *"), cron, NOW, quotas)
    with pytest.raises(QuotaExceeded) as refused:
        check_interval(Schedule("flood", "acme", "noop", "* * * * *"), cron, NOW, quotas)
    assert refused.value.quota is Quota.SCHEDULE_INTERVAL
    assert (refused.value.limit, refused.value.used, refused.value.retry_after_s) == (300, 60, None)
    assert "every 300 s" in str(refused.value)


def test_quotas_refuse_nonsense_and_an_override_changes_only_what_it_sets() -> None:
    for bad in (
        {"max_queued": -1},
        {"min_schedule_interval_s": 0},
        {"enqueue_rate": 0},
        {"enqueue_rate": float("inf")},
        {"enqueue_burst": 0},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Quotas(**bad)
    override = override_from("acme", {"max_queued": 50_000, "enqueue_rate": 5})
    merged = Quotas().merged(override)
    assert (merged.max_queued, merged.enqueue_rate, merged.max_schedules) == (50_000, 5, 100)
    assert Quotas().merged(QuotaOverride("acme")) == Quotas()
    with pytest.raises(ValueError, match="max_queued must be an integer"):
        override_from("acme", {"max_queued": "many"})
    with pytest.raises(ValueError, match="max_queued must be an integer"):
        override_from("acme", {"max_queued": True})
    with pytest.raises(ValueError, match="org_id"):
        QuotaOverride(" acme")


def test_an_org_is_near_a_quota_from_eighty_percent_of_it() -> None:
    quotas = Quotas(max_queued=100, max_schedules=10)
    assert near(OrgUsage("acme", queued=79, schedules=7), quotas) == []
    found = near(OrgUsage("acme", queued=80, schedules=10), quotas)
    assert [(n.quota, n.used, n.limit, n.fraction) for n in found] == [
        (Quota.QUEUED_JOBS, 80, 100, 0.8),
        (Quota.SCHEDULES, 10, 10, 1.0),
    ]
    assert near(OrgUsage("acme", queued=0), Quotas(max_queued=0)) == []
