"""The claim keeps walking an index with priorities and limits: EXPLAIN over 1,000,000 finished
rows (decision 0015). These tests read plans, never times."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from jobs_core import FlowLimit
from jobs_core.claims import ClaimPlan
from jobs_core.flow import FairTurn
from jobs_postgres import claims
from jobs_postgres.database import STORE_SESSION_SETTINGS, create_engine
from sqlalchemy import text

from tests.postgres.plans import HISTORY, plans

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.xdist_group("history")]

# Beside the million finished rows of ``history_url``: a queue of 2,000 due jobs of 20 keys at
# mixed priorities.
FILL = """
INSERT INTO jobs (id, org_id, type, payload, created_at, run_at, priority, concurrency_key)
SELECT gen_random_uuid(), 'org-1', 'crawl', '{}'::jsonb, :now - make_interval(secs => i),
       :now - make_interval(secs => i), (i % 5) - 2, 'site-' || (i % 20)
FROM generate_series(1, 2000) AS i;
"""


def _index_rows(plan: str) -> float:
    """The actual rows of the queue index scan of a plan."""
    line = next(line for line in plan.splitlines() if "Index Scan using jobs_queue_idx" in line)
    found = re.search(r"actual time=\S+ rows=([0-9.]+)", line)
    assert found is not None, line
    return float(found.group(1))


def test_the_claims_walk_the_queue_index_over_a_million_finished_rows(history_url: str) -> None:
    engine = create_engine(history_url, session_settings=STORE_SESSION_SETTINGS)
    try:
        now = datetime.now(UTC)
        with engine.begin() as conn:
            for part in FILL.split(";\n"):
                if part.strip():
                    conn.execute(text(part), {"now": now})
            conn.execute(text("ANALYZE jobs"))
            total = conn.execute(text("SELECT count(*) FROM jobs")).scalar_one()
        assert total == HISTORY + 2000

        # Both plans of each statement: the one made for these values and the generic one
        # every later execution of a worker's session reuses (tests/postgres/plans.py).
        (plain,) = claims.statements(ClaimPlan.of(10, now, ["crawl"]))
        for mode, plan in plans(
            engine, plain, {"now": now, "limit": 10, "types": ["crawl"]}
        ).items():
            assert "Index Scan using jobs_queue_idx" in plan, (mode, plan)
            assert "Sort" not in plan, (mode, plan)  # read in (priority DESC, created_at, id) order
            assert _index_rows(plan) <= 10, (mode, plan)
            assert "Seq Scan on jobs" not in plan, (mode, plan)

        # Under limits, alone and composed with fairness: the walk of the candidates (statement
        # 1) still stops after 10 rows of the queue index.
        limits = {"crawl": FlowLimit(key_limit=2, type_limit=50)}
        for turn in (None, FairTurn("org-0")):
            limited = ClaimPlan.of(10, now, ["crawl"], limits=limits, turn=turn)
            statement = claims.statements(limited)[0]
            params = claims.parameters(limited)
            for mode, plan in plans(engine, statement, params, claims.PLANNER).items():
                assert "Index Scan using jobs_queue_idx" in plan, (turn, mode, plan)
                assert "Seq Scan on jobs" not in plan, (turn, mode, plan)
                assert _index_rows(plan) <= 10, (turn, mode, plan)  # stopped after 10
    finally:
        engine.dispose()
