"""The worker's plans on a table the planner has never analyzed (bench/NOTES.md §2 and §9).

A freshly filled ``jobs`` table has no statistics: the planner then estimates one queued row and
may read every queued row through a bitmap scan and sort them, for each claim. The worker's
sessions (``STORE_SESSION_SETTINGS``) must plan the claim as an ordered walk of
``jobs_queue_idx`` that stops after ``limit`` rows, and the finish as a probe of the primary key:
both the plan made for the first executions' values and the generic plan every later execution
reuses (tests/postgres/plans.py). These tests read plans, never times.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from jobs_core import Done, FlowLimit, NewJob, domain
from jobs_core.claims import ClaimPlan
from jobs_core.flow import FairTurn
from jobs_postgres import claims, migrations, sql
from jobs_postgres.database import STORE_SESSION_SETTINGS, create_engine
from jobs_postgres.rows import patches_json
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

from tests.postgres.plans import generic_plan, index_rows_read, plans

pytestmark = pytest.mark.postgres

QUEUED = 3000


def _claim_plan(engine: Engine) -> str:
    """The executed plan of one claim (rolled back), as text."""
    params: dict[str, Any] = {"now": datetime.now(UTC), "limit": 1, "types": ["noop"]}
    (statement,) = claims.statements(ClaimPlan.of(1, params["now"], ["noop"]))
    with engine.connect() as conn, conn.begin() as tx:
        driver = conn.connection.driver_connection
        assert driver is not None
        rows = driver.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {statement}", params).fetchall()
        plan = "\n".join(row[0] for row in rows)
        tx.rollback()
    return plan


def test_the_worker_claims_through_the_queue_index_on_a_never_analyzed_table(
    scratch_url: str,
) -> None:
    migrations.upgrade(scratch_url)
    engine = create_engine(scratch_url, session_settings=STORE_SESSION_SETTINGS)
    try:
        now = datetime.now(UTC)
        PostgresJobStore(engine).insert_many(
            [NewJob(org_id="o", type="noop", payload={"k": i}) for i in range(QUEUED)], now
        )
        with engine.connect() as conn:
            analyzed = conn.execute(
                text(
                    "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL"
                    " FROM pg_stat_user_tables WHERE relname = 'jobs'"
                )
            ).scalar_one()
        assert analyzed, "the table must not have been analyzed for this test to mean anything"
        plan = _claim_plan(engine)
        assert "Index Scan using jobs_queue_idx" in plan, plan
        assert "Sort" not in plan, plan
        assert "Bitmap" not in plan, plan

        # Every hot statement, both plans: the claims walk the queue index in order; the
        # finish and the heartbeat probe the primary key; nothing reads the whole table.
        store = PostgresJobStore(engine)
        [held] = store.claim(1, now)
        assert held.lease is not None
        outcomes = patches_json([domain.patch(held.ref, Done({}), now)])
        common = {"now": now, "limit": 1}
        plain = ClaimPlan.of(1, now)
        typed = ClaimPlan.of(1, now, ["noop"])
        statements: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
            ("claim", claims.statements(plain)[0], common, ("jobs_queue_idx",)),
            (
                "claim of types",
                claims.statements(typed)[0],
                {**common, "types": ["noop"]},
                ("jobs_queue_idx",),
            ),
            ("finish", claims.finish(), {"outcomes": outcomes}, ("jobs_pkey",)),
            (
                "finish and claim",
                claims.statements(plain, finish=True)[0],
                {**common, "outcomes": outcomes},
                ("jobs_pkey", "jobs_queue_idx"),
            ),
            (
                "heartbeat",
                str(sql.HEARTBEAT.compile(dialect=engine.dialect)),
                {"now": now, "beat": now.isoformat(), "ids": [held.id], "leases": [held.lease]},
                ("jobs_pkey",),
            ),
        ]
        for name, compiled, params, indexes in statements:
            for mode, plan in plans(engine, compiled, params).items():
                where = f"{name}, {mode} plan:\n{plan}"
                for index in indexes:
                    assert f"Index Scan using {index}" in plan, where
                assert "Seq Scan on jobs" not in plan, where
                assert "Sort" not in plan, where
                assert "Bitmap" not in plan, where
    finally:
        engine.dispose()


def test_session_settings_reach_every_session_and_keep_utc(scratch_url: str) -> None:
    engine = create_engine(scratch_url, session_settings={"enable_bitmapscan": "off"})
    plain = create_engine(scratch_url)
    try:
        for _ in range(2):
            with engine.connect() as conn:
                assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "off"
                assert conn.execute(text("SHOW timezone")).scalar_one() == "UTC"
        with plain.connect() as conn:
            assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "on"
            assert conn.execute(text("SHOW timezone")).scalar_one() == "UTC"
    finally:
        engine.dispose()
        plain.dispose()


def test_the_finish_numbers_attempts_through_the_index_on_a_history_analyzed_empty(
    scratch_url: str,
) -> None:
    """A session keeps the generic plan it made at a statement's fifth execution for as long as
    it lives. Made when ``job_attempts`` was analyzed empty (a new deployment, a fresh
    database; autovacuum off), a plan that numbers each attempt by a sequential scan of the
    history is cheapest *then* and costs O(history) per finished job forever after: a drain of
    20,000 jobs fell from ~2,800 to ~1,000 jobs/s (issue 22). The store's sessions refuse
    sequential scans (``STORE_SESSION_SETTINGS``), so the plan made then is the probe of
    ``job_attempts_pkey`` that stays right as the history grows."""
    migrations.upgrade(scratch_url)
    engine = create_engine(scratch_url, session_settings=STORE_SESSION_SETTINGS)
    try:
        now = datetime.now(UTC)
        store = PostgresJobStore(engine)
        store.insert_many([NewJob(org_id="o", type="noop", payload={}) for _ in range(3)], now)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE jobs, job_attempts"))
        [held] = store.claim(1, now)
        outcomes = patches_json([domain.patch(held.ref, Done({}), now)])
        plan = generic_plan(engine, claims.finish(), {"outcomes": outcomes})
        assert "Seq Scan on job_attempts" not in plan, plan
        assert "job_attempts_pkey" in plan, plan
    finally:
        engine.dispose()


def test_the_fair_claim_walks_the_queue_in_order_on_an_analyzed_backlog_of_one_org(
    scratch_url: str,
) -> None:
    """The fair claim's FIFO part (``fair_fifo``) on a table analyzed with one org's backlog
    (autovacuum analyzes ``jobs`` as it fills): planned generically (``LIMIT :limit`` of an
    unknown value), reading the org's whole backlog through ``jobs_org_queue_idx`` and keeping
    the first ``limit`` in a top-N sort looked cheaper than the ordered walk of
    ``jobs_queue_idx``, and each claim sorted the queue (a drain of 20,000 jobs ran at ~1,800
    jobs/s, against ~3,000 without the fair order). Locked ``SKIP LOCKED`` as the plain walk
    is, it cannot be a top-N sort, and it walks the index in order and stops."""
    migrations.upgrade(scratch_url)
    engine = create_engine(scratch_url, session_settings=STORE_SESSION_SETTINGS)
    try:
        now = datetime.now(UTC)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jobs (id, org_id, type, payload, created_at, run_at)"
                    " SELECT gen_random_uuid(), 'org-a', 'work', '{}'::jsonb,"
                    " :now - make_interval(secs => i), :now - make_interval(secs => i)"
                    " FROM generate_series(1, :backlog) AS i"
                ),
                {"now": now, "backlog": 20_000},
            )
            conn.execute(text("ANALYZE jobs"))
        # as a worker runs it: a type with a limit among its types (statement 1 of the claim
        # under limits, after the finish of the jobs it passes over), and without limits
        limits = {"other": FlowLimit(key_limit=1)}
        for lim, setup in ((limits, claims.PLANNER), (None, "")):
            plan_of = ClaimPlan.of(100, now, ["work", "other"], limits=lim, turn=FairTurn(""))
            compiled = claims.statements(plan_of, finish=lim is not None)[0]
            params = {**claims.parameters(plan_of), "skipped": []}
            plan = generic_plan(engine, compiled, params, setup)
            read = index_rows_read(plan)
            # the head of org-a, the walk's first 100, their locks by key: never the backlog
            assert read < 500, (read, plan)
    finally:
        engine.dispose()
