"""The benchmark is a command, not a test (decision 0009): this only proves the command still
runs end to end at a tiny N — every phase, real worker processes, the results files — and that
its exactly-once check found nothing wrong. No figure it prints is asserted."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_bench_run_tiny_writes_its_results_with_every_job_run_once(pg_server: str) -> None:
    with tempfile.TemporaryDirectory(prefix="jobs-bench-test-") as tmp:
        out = Path(tmp) / "results"
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.run",
                "--tiny",
                "--pg-url",
                pg_server,
                "--db",
                f"jobs_bench_test_{secrets.token_hex(4)}",
                "--out",
                str(out),
                "--workdir",
                str(Path(tmp) / "work"),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        results = sorted(out.glob("*.json"))
        assert len(results) == 1, sorted(p.name for p in out.iterdir())
        document = json.loads(results[0].read_text())
        assert results[0].with_suffix(".md").is_file()
        assert document["errors"] == []
        (only,) = document["rounds"]
        drains = only["drain"]
        assert set(drains) == {"default", "default_history", "c10", "c10_history"}
        for name, drain in drains.items():
            assert drain["executions"] == drain["queued_before"] > 0, name
            assert (drain["duplicates"], drain["missing"], drain["unexpected"]) == (0, 0, 0), name
            assert (drain["unfinished_after"], drain["failed_after"]) == (0, 0), name
