"""The Overview's series reads what finished in its window, not the history: EXPLAIN over
1,000,000 finished rows a month old (decision 0037). These tests read plans, never times.

The plan read is the one made for the call's values: the API's sessions plan with
``plan_cache_mode = auto`` (only the worker's force generic plans), under which a prepared
statement keeps its custom plans while the generic one is estimated costlier, as here (without
the window's start, ``finished_at >= $2`` is estimated to match a third of the table)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from jobs_core.overview import EPOCH, Window, window_start
from jobs_postgres.database import create_engine
from jobs_postgres.overview_rows import SERIES
from sqlalchemy import text

from bench.overview_reads import fill

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.xdist_group("history")]

ORG = "org-1"  # 20,000 of the history's rows, and 500 finished in the last day


def test_the_series_reads_the_windows_finishes_through_the_finished_index(
    history_url: str,
) -> None:
    engine = create_engine(history_url)
    try:
        fill(engine, ORG, 500, hours=24)
        with engine.begin() as conn:
            conn.execute(text("ANALYZE jobs"))
        now = datetime.now(UTC)
        for window in Window:
            params = {
                "org_id": ORG,
                "bucket": window.bucket,
                "origin": EPOCH,
                "start": window_start(window, now),
            }
            with engine.connect() as conn:
                rows = conn.execute(text(f"EXPLAIN (ANALYZE, COSTS OFF) {SERIES.text}"), params)
                plan = "\n".join(row[0] for row in rows)
            assert "Scan using jobs_finished_idx" in plan or "Scan on jobs_finished_idx" in plan, (
                window,
                plan,
            )
            assert "Seq Scan on jobs " not in plan, (window, plan)
            assert "Parallel Seq Scan" not in plan, (window, plan)
    finally:
        engine.dispose()
