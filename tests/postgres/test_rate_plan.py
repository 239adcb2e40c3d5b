"""The claim under a rate limit (decision 0042): its parts are added to a plan only when a type
of the plan has a rate limit, and its statements keep walking the queue index, reading the keys'
records by primary key — EXPLAIN over 1,000,000 finished rows and 1,000 recorded keys."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from jobs_core import FlowLimit
from jobs_core.claims import ClaimPlan
from jobs_core.flow import FairTurn
from jobs_core.rates import RateLimit
from jobs_postgres import claims
from jobs_postgres.database import STORE_SESSION_SETTINGS, create_engine
from sqlalchemy import text

from tests.postgres.plans import plans
from tests.postgres.test_flow_plan import _index_rows

NOW = datetime(2026, 12, 7, tzinfo=UTC)
RATED = {"crawl": FlowLimit(key_limit=2, rate=RateLimit(5, 1.0)), "plain": FlowLimit()}


def test_a_plan_without_a_rate_limit_never_reads_or_writes_the_records() -> None:
    for types, fair, finish in itertools.product((None, ["crawl"]), (None, FairTurn()), (0, 1)):
        for limits in (None, {"crawl": FlowLimit(key_limit=2, type_limit=5)}):
            plan = ClaimPlan.of(5, NOW, types, limits=limits, turn=fair)
            assert not plan.rated
            texts = claims.statements(plan, finish=bool(finish))
            assert all("job_rate_keys" not in statement for statement in texts)
            assert not {"rate_counts", "rate_periods"} & set(claims.parameters(plan))
        rated = ClaimPlan.of(5, NOW, types, limits=RATED, turn=fair)
        assert rated.rated
        first, second = claims.statements(rated, finish=bool(finish))
        assert "job_rate_keys" in first  # the spent keys
        assert "INSERT INTO job_rate_keys" in second  # the starts written with the claim
        assert claims.parameters(rated)["rate_counts"] == [5, None]


# Beside the million finished rows: 2,000 due jobs of 20 keys, and the records of 1,000 keys
# (the 20 with room: their 5 starts 10 s old; 980 others, half of them spent).
FILL = """
INSERT INTO jobs (id, org_id, type, payload, created_at, run_at, priority, concurrency_key)
SELECT gen_random_uuid(), 'org-1', 'crawl', '{}'::jsonb, :now - make_interval(secs => i),
       :now - make_interval(secs => i), (i % 5) - 2, 'site-' || (i % 20)
FROM generate_series(1, 2000) AS i;
INSERT INTO job_rate_keys (type, key, starts)
SELECT 'crawl', 'site-' || k, array_fill(
    :now - make_interval(secs => CASE WHEN k >= 20 AND k % 2 = 0 THEN 0.1 ELSE 10 END),
    ARRAY[5])
FROM generate_series(0, 999) AS k;
"""


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.xdist_group("history")
def test_the_rated_claim_walks_the_queue_index_and_probes_the_records(history_url: str) -> None:
    engine = create_engine(history_url, session_settings=STORE_SESSION_SETTINGS)
    now = datetime.now(UTC)
    try:
        with engine.begin() as conn:
            for part in FILL.split(";\n"):
                if part.strip():
                    conn.execute(text(part), {"now": now})
            conn.execute(text("ANALYZE jobs"))
            conn.execute(text("ANALYZE job_rate_keys"))
            ids = [
                row[0]
                for row in conn.execute(
                    text(
                        "SELECT id FROM jobs WHERE status = 'queued' AND type = 'crawl' "
                        "ORDER BY priority DESC, created_at, id LIMIT 10"
                    )
                )
            ]
        for turn in (None, FairTurn("org-0")):
            plan = ClaimPlan.of(10, now, ["crawl"], limits=RATED, turn=turn)
            first, second = claims.statements(plan)
            params = claims.parameters(plan)
            for mode, shown in plans(engine, first, params, claims.PLANNER).items():
                assert "Index Scan using jobs_queue_idx" in shown, (turn, mode, shown)
                assert "Seq Scan" not in shown, (turn, mode, shown)
                assert "job_rate_keys_pkey" in shown, (turn, mode, shown)
                assert _index_rows(shown) <= 10, (turn, mode, shown)  # stopped after 10
            for mode, shown in plans(
                engine, second, {**params, "ids": ids}, claims.PLANNER
            ).items():
                assert "Seq Scan" not in shown, (turn, mode, shown)
                assert "job_rate_keys_pkey" in shown, (turn, mode, shown)
    finally:
        engine.dispose()
