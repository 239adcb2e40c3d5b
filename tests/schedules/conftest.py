"""Fixtures of the schedules and retention tests: empty schedule tables on the session's
database, and a registry of two plain types, one protected."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from jobs_core import FakeClock, JobContext, JobType, Registry
from jobs_postgres.cron import CronsimCron

from tests.pooling import empty_tables

if TYPE_CHECKING:
    from sqlalchemy import Engine


@pytest.fixture
def cron() -> CronsimCron:
    return CronsimCron()


@pytest.fixture
def registry() -> Registry:
    registry = Registry("schedule-tests")

    def noop(ctx: JobContext) -> None:
        return None

    registry.register(JobType("noop", noop, public=True))
    registry.register(JobType("report", noop))
    registry.register(JobType("history", noop, protected=True))
    return registry


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sched_engine(pg_engine: Engine) -> Engine:
    """``pg_engine`` with empty schedules, runs and settings too."""

    with pg_engine.begin() as conn:
        empty_tables(conn, "schedules, schedule_runs, jobs_settings")
    return pg_engine
