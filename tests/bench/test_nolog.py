"""``bench/nolog.py``, the benchmark instrument that measures the drain without the event log:
under ``JOBS_BENCH_NO_LOG=1`` the statements of ``jobs_postgres.sql`` keep their shape and lose
their log insert; without it they are the product's. Each case runs in a fresh interpreter (the
rewrite happens when the module is first imported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a Python process per test

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
from bench import nolog
installed = nolog.install_if_asked()
from datetime import UTC, datetime
from jobs_core.claims import ClaimPlan
from jobs_postgres import claims
plan = ClaimPlan.of(1, datetime.now(UTC))
texts = [claims.finish(), claims.statements(plan, finish=True)[0], claims.statements(plan)[0]]
print(installed, sum("INSERT INTO job_events" in t for t in texts), len(texts))
"""


def _run(env_value: str | None, code: str = PROBE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "JOBS_BENCH_NO_LOG"}
    if env_value is not None:
        env["JOBS_BENCH_NO_LOG"] = env_value
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


def test_without_the_variable_the_statements_log_their_events() -> None:
    done = _run(None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "3", "3"]


def test_with_the_variable_no_statement_logs() -> None:
    done = _run("1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "0", "3"]


def test_it_refuses_when_the_module_was_imported_first() -> None:
    done = _run("1", "import jobs_postgres.sql\nfrom bench import nolog\nnolog.install_if_asked()")
    assert done.returncode != 0
    assert "imported before the rewrite" in done.stderr
