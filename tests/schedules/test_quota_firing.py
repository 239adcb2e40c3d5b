"""A tenant's schedules fire within its org's queued quota (issue 23, decision 0033), on the real
PostgreSQL stores: the ticks past the room are dropped and counted, the jobs of another org and
the schedules declared in code are not held back; the count of schedules is exact under
concurrent creates."""

from __future__ import annotations

import threading

import pytest
from jobs_core import FakeClock, Registry, Status
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import Quota, QuotaExceeded, Quotas
from jobs_core.schedules import Schedule
from jobs_core.scheduling import ScheduleService
from jobs_postgres.cron import CronsimCron
from jobs_postgres.quotas import PostgresQuotaStore
from jobs_postgres.schedules import PostgresScheduleStore
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine

pytestmark = pytest.mark.postgres


def _quotas(engine: Engine, clock: FakeClock, **limits: int) -> QuotaService:
    return QuotaService(PostgresQuotaStore(engine), Quotas(**limits), clock)


def test_ticks_past_the_orgs_queued_quota_are_dropped(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    quotas = _quotas(sched_engine, clock, max_queued=3)
    service = ScheduleService(
        PostgresScheduleStore(sched_engine), registry, CronsimCron(), clock, quotas
    )
    for i in range(5):  # an operator's creates: no quota applies to them
        service.create(Schedule(f"s{i}", "tenant", "noop", "* * * * * *"))
    service.create(Schedule("other", "neighbour", "noop", "* * * * * *"))
    service.create(Schedule("internal", "tenant", "report", "* * * * * *"))
    clock.advance(1)
    fired = {(f.org_id, f.name): f for f in service.tick()}
    assert sum(len(f.job_ids) for (org, name), f in fired.items() if org == "tenant") == 3 + 1
    assert sum(f.dropped for f in fired.values()) == 2
    assert len(fired["neighbour", "other"].job_ids) == 1
    assert len(fired["tenant", "internal"].job_ids) == 1  # an internal type: not a tenant's
    jobs = PostgresJobStore(sched_engine)
    assert jobs.stats("tenant")[Status.QUEUED] == 4
    clock.advance(1)  # still at its quota: every tick of its public schedules is dropped
    fired = {(f.org_id, f.name): f for f in service.tick()}
    assert sum(f.dropped for f in fired.values()) == 5
    assert jobs.stats("tenant")[Status.QUEUED] == 5


def test_concurrent_creates_never_pass_the_count(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    quotas = _quotas(sched_engine, clock, max_schedules=3)
    service = ScheduleService(PostgresScheduleStore(sched_engine), registry, CronsimCron(), clock)
    refused: list[QuotaExceeded] = []
    barrier = threading.Barrier(8)

    def create(i: int) -> None:
        barrier.wait(30)
        try:
            service.create(Schedule(f"c{i}", "tenant", "noop", "*/5 * * * *"), quotas=quotas)
        except QuotaExceeded as error:
            refused.append(error)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(service.list_schedules("tenant")) == 3
    assert len(refused) == 5
    assert {e.quota for e in refused} == {Quota.SCHEDULES}
    assert {e.used for e in refused} == {3}


def test_ticks_fire_when_the_quota_cannot_be_counted(
    sched_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    from jobs_postgres.database import create_engine

    nowhere = create_engine("postgresql://postgres@127.0.0.1:1/none")  # no server listens
    quotas = QuotaService(PostgresQuotaStore(nowhere), Quotas(max_queued=0), clock)
    service = ScheduleService(
        PostgresScheduleStore(sched_engine), registry, CronsimCron(), clock, quotas
    )
    service.create(Schedule("s", "tenant", "noop", "* * * * * *"))
    clock.advance(1)
    [fired] = service.tick()
    assert (len(fired.job_ids), fired.dropped) == (1, 0)
    nowhere.dispose()
