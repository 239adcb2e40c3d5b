"""Schedules on a real PostgreSQL with a fake clock: CRUD rules, DST through the store, run now,
declared schedules, and many schedulers racing on threads (the process test is
test_scheduler_processes.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from jobs_core import FakeClock, Registry
from jobs_core.schedules import (
    MissedPolicy,
    Schedule,
    ScheduleDeclared,
    ScheduleExists,
    ScheduleInvalid,
)
from jobs_core.scheduling import ScheduleService
from jobs_postgres.cron import CronsimCron
from jobs_postgres.schedules import PostgresScheduleStore
from sqlalchemy import text

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres


def _service(engine: Engine, registry: Registry, clock: FakeClock) -> ScheduleService:
    return ScheduleService(PostgresScheduleStore(engine), registry, CronsimCron(), clock)


def _jobs(engine: Engine, org: str = "org") -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM jobs WHERE org_id = :o"), {"o": org}
            ).scalar_one()
        )


def test_dst_on_postgres_with_a_fake_clock(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    clock.set(datetime(2026, 3, 28, 12, tzinfo=UTC))
    service = _service(sched_engine, registry, clock)
    service.create(
        Schedule("nightly", "org", "noop", "30 2 * * *", "Europe/Paris", payload={"k": 1})
    )
    service.create(Schedule("hourly", "org", "noop", "0 * * * *", "Europe/Paris"))
    for start, end in (
        (datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 30, 0, tzinfo=UTC)),
        (datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 26, 0, tzinfo=UTC)),
    ):
        clock.set(start)
        # A paused-and-resumed schedule starts from now: the months between are not "missed".
        for name in ("nightly", "hourly"):
            service.pause("org", name)
            service.resume("org", name)
        while clock.now() < end:
            clock.advance(120)
            service.tick()
    with sched_engine.connect() as conn:
        runs = conn.execute(
            text(
                "SELECT s.name, r.tick FROM schedule_runs r "
                "JOIN schedules s ON s.id = r.schedule_id "
                "ORDER BY r.tick"
            )
        ).all()
    nightly = [tick for name, tick in runs if name == "nightly"]
    assert [t.astimezone(UTC).isoformat() for t in nightly] == [
        "2026-03-29T01:00:00+00:00",  # 03:00 CEST: 02:30 did not exist
        "2026-10-25T00:30:00+00:00",  # 02:30 CEST once, not again at 02:30 CET
    ]
    hourly = [tick for name, tick in runs if name == "hourly"]
    assert len(hourly) == len(set(hourly))
    # 2026-03-28 12:00Z -> 03-30 00:00Z is 36 real hours; the same for October.
    assert len(hourly) == 36 + 36
    assert _jobs(sched_engine) == len(runs)
    state = service.get("org", "nightly")
    assert state.last_job_id is not None
    assert state.last_run_at == nightly[-1]


def test_crud_rules(sched_engine: Engine, registry: Registry, clock: FakeClock) -> None:
    service = _service(sched_engine, registry, clock)
    state = service.create(Schedule("a", "org", "noop", "*/5 * * * *"))
    assert state.next_run_at == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    with pytest.raises(ScheduleExists, match="already exists"):
        service.create(Schedule("a", "org", "noop", "0 * * * *"))
    service.create(Schedule("a", "other-org", "noop", "0 * * * *"))  # names are per org
    with pytest.raises(ScheduleInvalid, match="unknown job type"):
        service.create(Schedule("b", "org", "nope", "0 * * * *"))
    with pytest.raises(ScheduleInvalid, match="invalid cron"):
        service.create(Schedule("b", "org", "noop", "0 25 * * *"))
    changed = service.update("org", "a", {"cron": "0 0 * * *", "missed": "each"})
    assert changed.schedule.missed is MissedPolicy.EACH
    assert changed.next_run_at == datetime(2026, 1, 2, tzinfo=UTC)
    assert [s.schedule.name for s in service.list_schedules("org")] == ["a"]
    assert len(service.list_schedules(None)) == 2
    service.remove("org", "a")
    assert service.list_schedules("org") == []


def test_run_now_and_paused_schedules(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    service = _service(sched_engine, registry, clock)
    service.create(Schedule("p", "org", "noop", "* * * * *", payload={"x": 1}))
    service.pause("org", "p")
    clock.advance(600)
    assert service.tick() == []  # paused: nothing fires
    state, job = service.run_now("org", "p")
    assert job.payload == {"x": 1}
    assert state.last_job_id == job.id
    resumed = service.resume("org", "p")
    assert resumed.next_run_at == clock.now().replace(second=0) + timedelta(minutes=1)


def test_declared_schedules_keep_an_operator_pause_and_refuse_edits(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    service = _service(sched_engine, registry, clock)
    declared = Schedule("sys", "system", "report", "0 3 * * *")
    service.declare([declared])
    service.pause("system", "sys")
    service.declare([declared])  # a restart
    assert service.get("system", "sys").schedule.enabled is False
    with pytest.raises(ScheduleDeclared, match="declared in code"):
        service.update("system", "sys", {"cron": "0 4 * * *"})
    with pytest.raises(ScheduleDeclared, match="declared in code"):
        service.remove("system", "sys")
    service.declare([Schedule("sys", "system", "report", "0 5 * * *")])  # the code changed
    state = service.get("system", "sys")
    assert state.schedule.cron == "0 5 * * *"
    assert state.next_run_at.hour == 5


def test_eight_schedulers_on_threads_fire_each_tick_once(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    service = _service(sched_engine, registry, clock)
    for i in range(5):
        service.create(Schedule(f"s{i}", "org", "noop", "* * * * * *"))

    # The barrier's action moves the fake clock one second per round: 8 schedulers race on
    # each second.
    def next_second() -> None:
        clock.advance(1)

    barrier = threading.Barrier(8, action=next_second)
    errors: list[BaseException] = []

    def scheduler() -> None:
        try:
            for _ in range(20):
                barrier.wait(30)
                service.tick()
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=scheduler) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    with sched_engine.connect() as conn:
        rows = conn.execute(
            text("SELECT schedule_id, count(*), count(DISTINCT tick) FROM schedule_runs GROUP BY 1")
        ).all()
    assert len(rows) == 5
    for _, count, distinct in rows:
        assert count == distinct == 20
    assert _jobs(sched_engine) == 100
