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
from jobs_core import Done, NewJob, domain
from jobs_core.claims import ClaimPlan
from jobs_postgres import claims, migrations, sql
from jobs_postgres.database import STORE_SESSION_SETTINGS, create_engine
from jobs_postgres.rows import patches_json
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

from tests.postgres.plans import plans

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
