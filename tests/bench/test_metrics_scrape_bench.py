"""``python -m bench.metrics_scrape`` runs end to end at a tiny size: it counts every live job
in its gauges, reports the read's plan, and drops its database. No figure is
asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psycopg
import pytest

from bench import metrics_scrape

pytestmark = [pytest.mark.postgres]


def test_the_scrape_bench_reads_the_live_rows_only(
    pg_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--pg-url", pg_server, "--rows", "2000", "--live", "300", "--types", "3"]
    assert metrics_scrape.main([*argv, "--scrapes", "3", "--out", str(tmp_path)]) == 0

    (written,) = tmp_path.glob("metrics-scrape-*.json")
    result = json.loads(written.read_text())
    assert result["gauge_series"] == 9, result  # 3 types x queued, running, scheduled
    # the plan is reported (at this size the planner may rightly scan the small table)
    assert "on jobs" in "\n".join(result["plan"]), result["plan"]
    out = capsys.readouterr().out
    assert "| the scrape (both) |" in out, out
    with psycopg.connect(pg_server, autocommit=True) as conn:  # its own only: others may run
        left = conn.execute(
            "SELECT datname FROM pg_database WHERE datname = %s",
            (f"bench_metrics_scrape_{os.getpid()}",),
        ).fetchall()
    assert left == []


def test_it_refuses_a_size_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        metrics_scrape.main(["--rows", "0"])
    assert "--rows must be at least 1" in capsys.readouterr().err
