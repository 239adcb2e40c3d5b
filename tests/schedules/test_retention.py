"""Retention on a real PostgreSQL: policies by age and by count, protected types never purged,
nothing purged by default, batches that walk the finished-jobs index, the run-time settings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobContext, JobType, Registry
from jobs_core.retention import (
    RetentionInvalid,
    RetentionPolicy,
    RetentionSettings,
    effective_policy,
    purge,
)
from jobs_postgres.retention import (
    PostgresRetentionStore,
    PostgresSettingsStore,
    explain_batch,
)
from sqlalchemy import text

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _noop(ctx: JobContext) -> None:
    return None


def _fill(engine: Engine, job_type: str, status: str, count: int, days_ago_from: int) -> None:
    """``count`` finished jobs, one per hour going back from ``days_ago_from`` days ago."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """INSERT INTO jobs (org_id, type, status, created_at, finished_at)
                SELECT 'org', :type, :status, t, t FROM (
                    SELECT CAST(:start AS timestamptz) - make_interval(hours => g) AS t
                    FROM generate_series(0, :n - 1) AS g) AS s"""
            ),
            {
                "type": job_type,
                "status": status,
                "start": NOW - timedelta(days=days_ago_from),
                "n": count,
            },
        )


def _count(engine: Engine, job_type: str, status: str | None = None) -> int:
    query = "SELECT count(*) FROM jobs WHERE type = :t" + (" AND status = :s" if status else "")
    with engine.connect() as conn:
        return int(conn.execute(text(query), {"t": job_type, "s": status}).scalar_one())


def test_nothing_is_purged_by_default(sched_engine: Engine, registry: Registry) -> None:
    _fill(sched_engine, "noop", "done", 50, 400)
    report = purge(PostgresRetentionStore(sched_engine), registry, RetentionSettings(), NOW)
    assert report.total == 0
    assert report.skipped == "no retention policy: every job is kept"
    assert _count(sched_engine, "noop") == 50


def test_age_and_count_policies_and_protected_types(sched_engine: Engine) -> None:
    registry = Registry("r")
    registry.register(JobType("aged", _noop, retention_days=10))
    registry.register(JobType("counted", _noop, keep_done=100, keep_failed=5))
    registry.register(JobType("history", _noop, protected=True))
    registry.register(JobType("untouched", _noop))
    _fill(sched_engine, "aged", "done", 24 * 20, 0)  # 20 days of hourly jobs
    _fill(sched_engine, "counted", "done", 300, 0)
    _fill(sched_engine, "counted", "failed", 20, 0)
    _fill(sched_engine, "counted", "cancelled", 20, 0)
    _fill(sched_engine, "history", "done", 100, 500)
    _fill(sched_engine, "untouched", "done", 100, 500)
    with sched_engine.begin() as conn:  # a queued and a running job are never purged
        conn.execute(
            text(
                "INSERT INTO jobs (org_id, type, status, created_at) VALUES "
                "('org', 'aged', 'queued', :old), ('org', 'aged', 'running', :old)"
            ),
            {"old": NOW - timedelta(days=900)},
        )
    # The operator's default applies to types that declare none, never to protected ones.
    settings = RetentionSettings(default_policy=RetentionPolicy(max_age_days=1000), batch_size=37)
    batches: list[int] = []
    report = purge(
        PostgresRetentionStore(sched_engine),
        registry,
        settings,
        NOW,
        on_batch=lambda t, b, n: batches.append(n),
    )
    assert _count(sched_engine, "aged", "done") == 24 * 10 + 1  # 10 days, the boundary kept
    assert _count(sched_engine, "aged", "queued") == _count(sched_engine, "aged", "running") == 1
    assert _count(sched_engine, "counted", "done") == 100
    assert (
        _count(sched_engine, "counted", "failed") + _count(sched_engine, "counted", "cancelled")
        == 5
    )
    assert _count(sched_engine, "history") == 100
    assert _count(sched_engine, "untouched") == 100  # 500 days old < 1000 days
    assert report.removed == {
        "aged": {"done": 239},
        "counted": {"done": 200, "failed": 35},
    }
    assert max(batches) <= 37
    assert sum(batches) == report.total == 474
    # The operator's override beats the code's declaration; a protected type stays protected.
    override = RetentionSettings(
        per_type={"aged": RetentionPolicy(keep_done=3), "history": RetentionPolicy(keep_done=0)}
    )
    purge(PostgresRetentionStore(sched_engine), registry, override, NOW)
    assert _count(sched_engine, "aged", "done") == 3
    assert _count(sched_engine, "history") == 100
    assert effective_policy(registry.get("history"), override) is None


def test_keep_zero_and_the_purge_switch(sched_engine: Engine, registry: Registry) -> None:
    _fill(sched_engine, "report", "done", 30, 0)
    store = PostgresRetentionStore(sched_engine)
    off = RetentionSettings(purge_enabled=False, per_type={"report": RetentionPolicy(keep_done=0)})
    assert purge(store, registry, off, NOW).skipped is not None
    assert _count(sched_engine, "report") == 30
    report = purge(store, registry, off.merged({"purge_enabled": True}), NOW)
    assert report.removed == {"report": {"done": 30}}


def test_a_batch_walks_the_finished_index_not_the_history(sched_engine: Engine) -> None:
    for job_type in ("a", "b", "c", "d"):
        _fill(sched_engine, job_type, "done", 5000, 0)
    with sched_engine.begin() as conn:
        conn.execute(text("ANALYZE jobs"))
    plan = explain_batch(sched_engine, "b", (NOW - timedelta(days=30), uuid.UUID(int=0)))
    assert "jobs_finished_idx" in plan, plan
    assert "Seq Scan" not in plan, plan


def test_settings_round_trip_and_bad_settings(sched_engine: Engine) -> None:
    store = PostgresSettingsStore(sched_engine)
    assert store.load() == RetentionSettings()
    changed = RetentionSettings().merged(
        {"default_policy": {"max_age_days": 30}, "per_type": {"noop": {"keep_done": 10}}}
    )
    store.save(changed, by="test")
    assert store.load() == changed
    for bad in (
        {"batch_size": 0},
        {"purge_enabled": "yes"},
        {"default_policy": {"max_age_days": 0}},
        {"per_type": {"x": {"keep": 1}}},
        {"purge_enbled": False},
    ):
        with pytest.raises(RetentionInvalid):
            RetentionSettings().merged(bad)


def test_the_attempts_of_a_purged_job_go_with_it(sched_engine: Engine) -> None:
    """Issue 24: a job's attempt records are kept while it is and purged in its batch."""
    registry = Registry("r")
    registry.register(JobType("aged", _noop, retention_days=10))
    _fill(sched_engine, "aged", "done", 24 * 20, 0)  # 20 days of hourly jobs
    with sched_engine.begin() as conn:
        conn.execute(
            text(
                """INSERT INTO job_attempts (job_id, attempt, started_at, ended_at, outcome)
                SELECT j.id, a, j.finished_at, j.finished_at, 'done'
                FROM jobs AS j CROSS JOIN generate_series(1, 2) AS a WHERE j.type = 'aged'"""
            )
        )
    report = purge(PostgresRetentionStore(sched_engine), registry, RetentionSettings(), NOW)
    kept = _count(sched_engine, "aged")
    assert report.total == 24 * 20 - kept
    assert 0 < kept < 24 * 20
    with sched_engine.connect() as conn:
        records = conn.execute(text("SELECT count(*) FROM job_attempts")).scalar_one()
    assert records == 2 * kept
