"""The pure schedule rules with a fake clock: missed-tick policies and both daylight-saving
changes of Europe/Paris in 2026 (the cron library is the shipped adapter, cronsim)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from jobs_core.schedules import (
    MissedPolicy,
    Schedule,
    ScheduleInvalid,
    first_run_at,
    plan_firing,
)
from jobs_postgres.cron import CronsimCron

PARIS = ZoneInfo("Europe/Paris")


def _schedule(cron: str, tz: str = "UTC", **kw: object) -> Schedule:
    return Schedule(name="s", org_id="org", job_type="noop", cron=cron, timezone=tz, **kw)  # type: ignore[arg-type]


def _run(schedule: Schedule, start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """A scheduler looking every ``step`` from ``start`` to ``end``: the ticks it fires."""
    cron = CronsimCron()
    next_run = first_run_at(schedule, start, cron)
    fired: list[datetime] = []
    now = start
    while now <= end:
        firing = plan_firing(schedule, next_run, now, cron)
        fired.extend(firing.ticks)
        next_run = firing.next_run_at
        now += step
    return fired


def test_spring_forward_a_daily_job_in_the_skipped_hour_runs_once_at_three() -> None:
    # 2026-03-29 in Paris: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    fired = _run(
        _schedule("30 2 * * *", "Europe/Paris"),
        datetime(2026, 3, 27, 12, tzinfo=UTC),
        datetime(2026, 3, 31, 12, tzinfo=UTC),
        timedelta(minutes=1),
    )
    local = [t.astimezone(PARIS) for t in fired]
    assert [(t.day, t.hour, t.minute) for t in local] == [
        (28, 2, 30),
        (29, 3, 0),  # the first instant after the gap, once
        (30, 2, 30),
        (31, 2, 30),
    ]
    assert len(set(fired)) == len(fired)


def test_fall_back_a_daily_job_in_the_repeated_hour_runs_once() -> None:
    # 2026-10-25 in Paris: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    fired = _run(
        _schedule("30 2 * * *", "Europe/Paris"),
        datetime(2026, 10, 23, 12, tzinfo=UTC),
        datetime(2026, 10, 27, 12, tzinfo=UTC),
        timedelta(minutes=1),
    )
    utc_times = [t.isoformat() for t in fired]
    assert utc_times == [
        "2026-10-24T00:30:00+00:00",
        "2026-10-25T00:30:00+00:00",  # 02:30 CEST, the first one; not 02:30 CET again
        "2026-10-26T01:30:00+00:00",
        "2026-10-27T01:30:00+00:00",
    ]


@pytest.mark.parametrize(
    ("day", "hours"), [(datetime(2026, 3, 29), 23), (datetime(2026, 10, 25), 25)]
)
def test_an_hourly_job_follows_real_hours_through_both_changes(day: datetime, hours: int) -> None:
    start = day.replace(tzinfo=PARIS).astimezone(UTC) - timedelta(seconds=1)
    end = (day + timedelta(days=1)).replace(tzinfo=PARIS).astimezone(UTC) - timedelta(seconds=1)
    fired = _run(_schedule("0 * * * *", "Europe/Paris"), start, end, timedelta(minutes=1))
    assert len(fired) == hours  # a 23-hour and a 25-hour local day
    gaps = {b - a for a, b in itertools.pairwise(fired)}
    assert gaps == {timedelta(hours=1)}  # never two jobs in one real hour, never a lost hour


def test_a_late_scheduler_fires_each_on_time_tick_it_finds() -> None:
    schedule = _schedule("* * * * * *")
    cron = CronsimCron()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    firing = plan_firing(schedule, start, start + timedelta(seconds=5), cron)
    assert len(firing.ticks) == 6
    assert firing.dropped == 0
    assert firing.next_run_at == start + timedelta(seconds=6)


@pytest.mark.parametrize(
    ("policy", "fired", "dropped"),
    [(MissedPolicy.SKIP, 0, 10), (MissedPolicy.ONCE, 1, 9), (MissedPolicy.EACH, 4, 6)],
)
def test_missed_ticks_follow_the_schedule_policy(
    policy: MissedPolicy, fired: int, dropped: int
) -> None:
    # Hourly, nothing ran for 10 hours; now is 30 min after the last tick (beyond the grace).
    schedule = _schedule("0 * * * *", missed=policy, max_catchup=4)
    cron = CronsimCron()
    first = datetime(2026, 1, 1, 0, tzinfo=UTC)
    now = datetime(2026, 1, 1, 9, 30, tzinfo=UTC)
    firing = plan_firing(schedule, first, now, cron)
    assert len(firing.ticks) == fired
    assert firing.dropped == dropped
    assert firing.next_run_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    if policy is MissedPolicy.ONCE:
        assert firing.ticks == (datetime(2026, 1, 1, 9, tzinfo=UTC),)  # the latest missed
    if policy is MissedPolicy.EACH:
        assert firing.ticks[-1] == datetime(2026, 1, 1, 9, tzinfo=UTC)  # the most recent four


def test_a_long_outage_of_a_per_second_schedule_is_bounded() -> None:
    schedule = _schedule("* * * * * *", missed=MissedPolicy.EACH, max_catchup=3)
    cron = CronsimCron()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    firing = plan_firing(schedule, start, start + timedelta(days=7), cron)
    # Three missed ticks, plus the on-time ones of the last minute (grace), nothing more.
    assert 3 < len(firing.ticks) <= 3 + 61
    assert firing.next_run_at == start + timedelta(days=7, seconds=1)


def test_not_due_fires_nothing() -> None:
    cron = CronsimCron()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    firing = plan_firing(_schedule("0 * * * *"), now + timedelta(minutes=5), now, cron)
    assert firing.ticks == ()
    assert firing.next_run_at == now + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "* * *"}, "invalid cron expression"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone"),
    ],
)
def test_bad_expressions_and_zones_say_what_to_do(fields: dict[str, str], message: str) -> None:
    values = {"cron": "0 * * * *", "timezone": "UTC", **fields}
    with pytest.raises(ScheduleInvalid, match=message):
        CronsimCron().check(values["cron"], values["timezone"])


@pytest.mark.parametrize(
    "fields",
    [{"name": "Bad Name"}, {"org_id": ""}, {"max_catchup": 0}, {"missed": "sometimes"}],
)
def test_bad_schedules_are_refused(fields: dict[str, object]) -> None:
    values: dict[str, object] = {
        "name": "ok",
        "org_id": "org",
        "job_type": "noop",
        "cron": "0 * * * *",
        **fields,
    }
    with pytest.raises(ValueError):  # noqa: PT011 - ScheduleInvalid or the enum's ValueError
        Schedule(**values)  # type: ignore[arg-type]
