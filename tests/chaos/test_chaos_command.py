"""The chaos suite at CI scale: ``python -m bench.chaos --workers 3 --jobs 300 --small`` as a real
command, with its own embedded PostgreSQL, real worker processes and every fault at least once
(docs/chaos.md). The run must end with every invariant held and say so in its results file.

On the worker before its lease fence (issue 11, finding 1) this test failed: the blackholed
worker kept running its handler while another worker ran the same job (an overlap of 0.1 to 7
s per run). The seed is random on purpose (chaos that always hits the same instants proves
less); a failure prints it, with the results, to replay the same plan of jobs and faults
(``--seed``)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

FENCED = importlib.util.find_spec("jobs_worker.fence") is not None
"""Whether the worker has its lease fence (decision 0010). Without it the blackhole makes two
workers run one job at once (finding 1 of issue 11): the run breaks invariant 2, as it should."""


@pytest.mark.xfail(
    not FENCED,
    reason="no lease fence in this worker: the blackholed worker's handler overlaps the re-run",
    strict=False,  # a run whose blackhole caught no job at the wrong instant may still pass
)
def test_a_small_chaos_run_inflicts_every_fault_and_keeps_every_invariant() -> None:
    seed = random.SystemRandom().randrange(2**31)
    with tempfile.TemporaryDirectory(prefix="jobs-chaos-test-") as tmp:
        out = Path(tmp) / "results"
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        command = [
            sys.executable,
            "-m",
            "bench.chaos",
            *("--workers", "3", "--jobs", "300", "--concurrency", "2", "--small"),
            *("--seed", str(seed), "--out", str(out), "--timeout-s", "150"),
        ]
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=280,
            check=False,
        )
        said = f"seed {seed}, exit {done.returncode}:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
        results = sorted(out.glob("chaos-*.json"))
        assert len(results) == 1, said
        assert results[0].with_suffix(".md").is_file()
        document = json.loads(results[0].read_text())
    figures = document["figures"]
    # Every fault happened, the blackhole while worker 0 held a job outlasting the threshold.
    for fault in ("kills", "pg_restarts", "terminated_backends", "blackholes"):
        assert figures[fault] >= 1, f"no {fault}: {said}"
    assert figures["blackholes_holding_long_job"] >= 1, said
    assert figures["cancels_requested"] >= 1, said
    assert figures["jobs"] == 300, said
    assert figures["finished"], said
    # Every invariant held.
    assert document["verdict"]["violations"] == {
        "missing": 0,
        "unexpected": 0,
        "lost": 0,
        "overlaps": 0,
        "over_attempts": 0,
        "inconsistent": 0,
        "late_starts": 0,
        "orphan_ends": 0,
    }, said
    assert figures["statuses"].keys() <= {"done", "failed", "cancelled"}, said
    assert sum(figures["statuses"].values()) == 300, said
    assert figures["executions"] >= 300, said
    assert document["ok"] is True, said
    assert done.returncode == 0, said
