"""``python -m bench.fleet`` runs end to end at a tiny size: its own cluster and PgBouncer, a
fleet direct and through the pooler, the ceiling's steps, the results files, everything removed
after. No figure is asserted (decision 0009), only that every job ran once and the report holds
what docs/scaling.md §6 promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cluster
from bench.fleet import steps_up_to
from bench.fleet_support import ceiling

ROOT = Path(__file__).resolve().parents[2]


def test_the_ceiling_is_where_doubling_the_workers_stops_helping() -> None:
    assert steps_up_to(32) == [1, 2, 4, 8, 16, 32]
    assert steps_up_to(6) == [1, 2, 4, 6]
    rates = {1: 100.0, 2: 190.0, 4: 350.0, 8: 370.0, 16: 360.0}
    steps = [{"workers": n, "jobs_per_s": r} for n, r in rates.items()]
    assert ceiling(steps) == 4  # 4 -> 8 gained under 10 %
    assert ceiling(steps[:3]) is None


@pytest.mark.slow
def test_bench_fleet_tiny_runs_every_job_once_direct_and_pooled(tmp_path: Path) -> None:
    reason = cluster.missing(pooler=True, server=True)
    if reason is not None:
        pytest.skip(f"bench.fleet needs its own cluster and pooler: {reason}")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.fleet", "--workers", "2", "--slots", "2"),
            *("--jobs", "300", "--step-jobs", "200", "--out", str(tmp_path)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    paths = json.loads(done.stdout.strip().splitlines()[-1])
    results = json.loads(Path(paths["json"]).read_text())
    assert [f["target"] for f in results["fleets"]] == ["direct", "pgbouncer (pool 20)"]
    for fleet in results["fleets"]:
        assert fleet["exactly_once"] == {
            "executions": 300,
            "duplicates": 0,
            "missing": 0,
            "unexpected": 0,
        }
        assert fleet["calls"]["claim"] + fleet["calls"]["complete"] > 0
        assert fleet["top_statements"], fleet
        assert fleet["server_connections_peak"]["connections"] > 0
    for found in results["ceiling"].values():
        assert [s["workers"] for s in found["steps"]] == [1, 2]
    assert "## The ceiling" in Path(paths["md"]).read_text()


def test_what_cannot_be_made_here_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason a skipped pooler or replica test shows in the summary."""
    monkeypatch.setattr(cluster, "pgbouncer", lambda: None)
    monkeypatch.setattr(cluster, "bindir", lambda: None)
    assert cluster.missing(pooler=True) == "pgbouncer is not installed (apt-get install pgbouncer)"
    assert "server binaries" in (cluster.missing(server=True) or "")
