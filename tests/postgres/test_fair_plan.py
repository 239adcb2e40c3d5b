"""The fair claim walks indexes: EXPLAIN with 100,000 queued jobs of one org, a few other orgs
and 1,000,000 finished rows (decision 0015, "Fairness between orgs"). Reads plans, never times."""

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

from tests.postgres.plans import index_rows_read, plans

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.xdist_group("history")]

BACKLOG = 100_000

# Beside the million finished rows of ``history_url``: org-a's backlog and ten other orgs.
FILL = """
INSERT INTO jobs (id, org_id, type, payload, created_at, run_at, concurrency_key)
SELECT gen_random_uuid(), 'org-a', 'work', '{}'::jsonb, :now - make_interval(secs => i),
       :now - make_interval(secs => i), 'site-' || (i % 1000)
FROM generate_series(1, :backlog) AS i;
INSERT INTO jobs (id, org_id, type, payload, created_at, run_at)
SELECT gen_random_uuid(), 'org-' || chr(98 + i), 'work', '{}'::jsonb, :now, :now
FROM generate_series(0, 9) AS i
"""


def test_the_fair_claim_walks_indexes_past_a_backlog_of_one_org(history_url: str) -> None:
    engine = create_engine(history_url, session_settings=STORE_SESSION_SETTINGS)
    try:
        now = datetime.now(UTC)
        with engine.begin() as conn:
            for part in FILL.split(";\n"):
                conn.execute(
                    text(part),
                    {"now": now, "backlog": BACKLOG},
                )
            conn.execute(text("ANALYZE jobs"))

        # fair alone, with and without a type filter; then composed with limits (statement 1
        # of the claim under limits, with its planner settings): the heads are still probed
        # through jobs_org_queue_idx, never by reading org-a's backlog (decision 0027)
        limits = {"work": FlowLimit(key_limit=2, type_limit=1000)}
        for types, lim, setup in (
            (["work"], None, ""),
            (None, None, ""),
            (["work"], limits, claims.PLANNER),
        ):
            plan_of = ClaimPlan.of(10, now, types, limits=lim, turn=FairTurn("org-a"))
            compiled = claims.statements(plan_of)[0]
            values = claims.parameters(plan_of)
            # both plans: for these values, and the generic one a worker's session reuses
            for mode, plan in plans(engine, compiled, values, setup).items():
                assert "Seq Scan on jobs" not in plan, (mode, plan)
                assert "Bitmap" not in plan, (mode, plan)
                assert "jobs_org_queue_idx" in plan, (mode, plan)
                # 11 orgs: a probe or two per org, the plain walk's first 10, the locks by key;
                # never the 100,000 queued rows of org-a nor the million finished ones
                assert index_rows_read(plan) < 200, (mode, plan)
                if lim is None:  # statement 1 under limits locks, the second one claims
                    claimed = re.search(r"Update on jobs.*\n.*", plan)
                    assert claimed is not None, (mode, plan)
    finally:
        engine.dispose()
