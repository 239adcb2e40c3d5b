"""``python -m bench.children`` still runs end to end at a tiny N, every phase and the RSS phase
on a real worker process, and every job it drained was done. No figure is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_bench_children_runs_every_phase(pg_server: str) -> None:
    with tempfile.TemporaryDirectory(prefix="jobs-bench-children-test-") as tmp:
        out = Path(tmp) / "results"
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        done = subprocess.run(
            [
                *(sys.executable, "-m", "bench.children"),
                *("--n", "2", "--pg-url", pg_server, "--out", str(out)),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (results,) = out.glob("children-*.json")
        doc = json.loads(results.read_text())
        assert len(doc["drains"]) == 8
        assert all(row["not_done"] == 0 for row in doc["drains"]), doc["drains"]
        assert doc["rss"]["children_running"] == 8, doc
        assert (out / results.name.replace(".json", ".md")).read_text().startswith("# Subprocess")
