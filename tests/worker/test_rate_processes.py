"""Rate limits across real worker processes (issue 25 item 4, decision 0042): eight ``python -m
jobs_worker`` processes drain jobs of types limited to N starts per key per second; over any
window of one second, wherever it is placed, no key ever starts more than N jobs (the starts are
the claims' ``job_attempts.started_at``, the instant the rate counts), the rate is reached, a
job passed over spends no attempt, and jobs of a type without a limit drain alongside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, SystemClock
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import text

from tests.worker import rate_registry
from tests.worker.helpers import ORG, wait_until

if TYPE_CHECKING:
    from sqlalchemy import Engine

# Eight workers of four slots hold ~80 of the server's 100 connections: the test runs alone.
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.alone]

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 8
SITES = 4
PER_SITE = 15

# The most starts of one key in a window [start, start + P) opened at any start of the type:
# the busiest window of any placement opens at a start.
BUSIEST_WINDOW = """
SELECT coalesce(max(n), 0) FROM (
    SELECT (SELECT count(*) FROM job_attempts AS b JOIN jobs AS jb ON jb.id = b.job_id
            WHERE jb.type = ja.type AND jb.concurrency_key = ja.concurrency_key
              AND b.started_at >= a.started_at
              AND b.started_at < a.started_at + make_interval(secs => :per)) AS n
    FROM job_attempts AS a JOIN jobs AS ja ON ja.id = a.job_id WHERE ja.type = :type
) AS o
"""

# Per key: its first and last start.
SPANS = """
SELECT j.concurrency_key, extract(epoch FROM max(a.started_at) - min(a.started_at))
FROM job_attempts AS a JOIN jobs AS j ON j.id = a.job_id WHERE j.type = :type
GROUP BY j.concurrency_key
"""


@pytest.fixture
def processes(pg_url: str) -> Iterator[tuple[list[subprocess.Popen[bytes]], str]]:
    """Eight worker processes of four slots on the session's database (killed at the end), and
    the directory of their logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        JOBS_DATABASE_URL=pg_url,
        JOBS_CONCURRENCY="4",
        JOBS_POLL_INTERVAL_S="0.1",
        JOBS_EXTRA_REGISTRIES="tests.worker.rate_registry:registry",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    with tempfile.TemporaryDirectory(prefix="jobs-rate-test-") as logs:
        started = []
        for index in range(PROCESSES):
            log = Path(logs, f"worker-{index}.log").open("wb")  # noqa: SIM115 - closed below
            started.append(
                (
                    subprocess.Popen(
                        [sys.executable, "-m", "jobs_worker"],
                        cwd=ROOT,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    ),
                    log,
                )
            )
        try:
            yield [process for process, _ in started], logs
        finally:
            for process, log in started:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
                log.close()


def _logs(directory: str) -> str:
    return "\n".join(
        f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:]
        for log in sorted(Path(directory).glob("*.log"))
    )


def test_eight_processes_never_start_more_than_n_per_key_in_any_window(
    pg_engine: Engine, processes: tuple[list[subprocess.Popen[bytes]], str]
) -> None:
    workers, logs = processes
    store = PostgresJobStore(pg_engine)
    service = JobService(store, rate_registry.registry, SystemClock())
    pids = {p.pid for p in workers}
    wait_until(
        lambda: {w.pid for w in store.live_workers(SystemClock().now())} == pids,
        240,
        "eight workers to register",
    )

    sites = [{"site": f"s{i % SITES}"} for i in range(SITES * PER_SITE)]
    service.enqueue_many(ORG, "rated_fetch", sites)
    service.enqueue_many(ORG, "rated_both", sites)
    service.enqueue_many(ORG, "unrated", [{"n": i} for i in range(200)])

    def remaining() -> int:
        with pg_engine.connect() as conn:
            return int(
                conn.execute(
                    text("SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')")
                ).scalar_one()
            )

    try:
        wait_until(lambda: remaining() == 0, 120, "the queue to drain")
    except AssertionError:
        raise AssertionError(f"{remaining()} jobs left\n{_logs(logs)}") from None

    count, per = rate_registry.RATE
    with pg_engine.connect() as conn:
        statuses = conn.execute(text("SELECT DISTINCT status, attempts FROM jobs")).all()
        busiest = {
            kind: conn.execute(text(BUSIEST_WINDOW), {"type": kind, "per": per}).scalar_one()
            for kind in ("rated_fetch", "rated_both")
        }
        spans: dict[str, dict[str, float]] = {
            kind: {key: float(span) for key, span in conn.execute(text(SPANS), {"type": kind})}
            for kind in ("rated_fetch", "rated_both")
        }
        writers = conn.execute(
            text("SELECT count(DISTINCT report->>'pid') FROM jobs WHERE type = 'rated_fetch'")
        ).scalar_one()
    assert [tuple(row) for row in statuses] == [("done", 1)]  # passed over: no attempt spent
    assert busiest == {"rated_fetch": count, "rated_both": count}  # reached, never exceeded
    # 15 starts of a key at 3 per second: its first and last at least 4 s apart
    minimum = (PER_SITE // count - 1) * per
    for kind, by_key in spans.items():
        assert len(by_key) == SITES
        assert all(span >= minimum for span in by_key.values()), (kind, by_key)
    assert writers >= 2  # the keys' starts were shared by the processes

    for process in workers:
        process.send_signal(signal.SIGTERM)
    assert [p.wait(60) for p in workers] == [0] * PROCESSES
