"""``python -m bench.stream --tiny`` runs end to end: three drains (events off, on, with
clients), an API process, concurrent stream clients, the results files. No figure is asserted
(decision 0009), only that every client got every event and every job ran once."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_bench_stream_tiny_delivers_every_event(pg_server: str) -> None:
    db = f"jobs_bench_stream_test_{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="jobs-stream-bench-test-") as tmp:
        out = Path(tmp) / "results"
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.stream",
                "--tiny",
                "--pg-url",
                pg_server,
                "--db",
                db,
                "--out",
                str(out),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (result,) = out.glob("stream-*.json")
        doc = json.loads(result.read_text())
        clients = doc["rounds"][0]["clients"]
        assert clients["clients_ready"] == doc["clients"]
        assert clients["events_received"] == clients["events_expected"]
        assert clients["resyncs"] == 0
        assert all(doc["rounds"][0][mode]["exactly_once"] for mode in ("off", "on", "clients"))
        # off writes no event row at all (bench/nolog.py); on logs each job's enqueue, claim
        # and finish
        assert doc["rounds"][0]["off"]["events_logged"] == 0
        assert doc["rounds"][0]["on"]["events_logged"] == 3 * doc["n"]
        assert list(out.glob("stream-*.md"))
    with psycopg.connect(pg_server, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (db,)).fetchone()
    assert left == (0,), f"the benchmark left its database {db} behind"
