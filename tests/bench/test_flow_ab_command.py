"""``python -m bench.flow ab`` runs end to end on the smallest inputs: this tree on both sides
(its own virtualenv), one round of the bulk enqueue, with the ``nolog`` variant as a third
side. No figure is asserted (decision 0009); the command must write its results where it is
told, with a ratio per round for every side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_bench_flow_ab_bulk_with_a_variant_writes_paired_ratios(pg_server: str) -> None:
    repo_results = set((ROOT / "bench" / "results").iterdir())
    with tempfile.TemporaryDirectory(prefix="jobs-flow-ab-test-") as tmp:
        out = Path(tmp) / "results"
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        command = [
            sys.executable, "-m", "bench.flow", "--pg-url", pg_server, "--out", str(out),
            "ab", "--b", str(ROOT), "--phases", "bulk", "--rounds", "2", "--n", "200",
            "--variant", "nolog:JOBS_BENCH_NO_LOG=1",
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (result,) = out.glob("flow-ab-bulk-*.json")
        doc = json.loads(result.read_text())
        assert doc["order"] == ["A", "B", "nolog", "nolog", "B", "A"]
        for side in ("A", "B", "nolog"):
            assert len(doc["jps"][side]["enqueue_bulk"]) == 2
            assert all(value > 0 for value in doc["jps"][side]["enqueue_bulk"])
        median, low, high = doc["ratio_a_over_variant"]["nolog"]["enqueue_bulk"]
        assert low <= median <= high
        assert "| enqueue_bulk: A over nolog |" in next(out.glob("flow-ab-bulk-*.md")).read_text()
    assert set((ROOT / "bench" / "results").iterdir()) == repo_results
    # its own databases only: another bench command on the same server is not this one's
    ours = [f"bench_flow_{side}".lower() for side in ("A", "B", "nolog")]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        left = conn.execute(
            "SELECT array_agg(datname) FROM pg_database WHERE lower(datname) = ANY(%s)", (ours,)
        ).fetchone()
    assert left == (None,), f"the benchmark left databases behind: {left}"
