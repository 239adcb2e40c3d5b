"""Flow control across real worker processes: eight ``python -m jobs_worker`` processes compete
for jobs of a type limited per key and of a capped type; every execution writes its start and
end in a recorder table; the limits are never exceeded. The processes also register themselves
(``jobs workers``) and are gone once they stop."""

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

from tests.worker import flow_registry
from tests.worker.helpers import ORG, wait_until

if TYPE_CHECKING:
    from sqlalchemy import Engine

# Eight workers of four slots hold ~80 of the server's 100 connections: the test runs alone.
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.alone]

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 8
LOGS: dict[str, str] = {}

# The most runs of one key (or one type) that overlap at any run's start.
MAX_OVERLAP = """
SELECT coalesce(max(n), 0) FROM (
    SELECT (SELECT count(*) FROM flow_test_runs AS b
            WHERE b.type = a.type AND {same}
              AND b.started_at <= a.started_at AND b.ended_at > a.started_at) AS n
    FROM flow_test_runs AS a WHERE a.type = :type
) AS o
"""


@pytest.fixture
def processes(pg_url: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Eight worker processes of four slots on the session's database (killed at the end); their
    logs are in the directory ``LOGS["dir"]`` names while the test runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        JOBS_DATABASE_URL=pg_url,
        JOBS_CONCURRENCY="4",
        JOBS_POLL_INTERVAL_S="0.2",
        JOBS_EXTRA_REGISTRIES="tests.worker.flow_registry:registry",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    with tempfile.TemporaryDirectory(prefix="jobs-flow-test-") as logs:
        LOGS["dir"] = logs
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
            yield [process for process, _ in started]
        finally:
            for process, log in started:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
                log.close()


def test_eight_processes_never_exceed_the_limits(
    pg_engine: Engine, processes: list[subprocess.Popen[bytes]]
) -> None:
    with pg_engine.begin() as conn:
        conn.execute(text(flow_registry.RUNS_DDL))
        conn.execute(text("TRUNCATE flow_test_runs"))
    store = PostgresJobStore(pg_engine)
    service = JobService(store, flow_registry.registry, SystemClock())

    # every process registered itself (host, pid, types, slots)
    def registered() -> set[int]:
        return {w.pid for w in store.live_workers(SystemClock().now())}

    pids = {p.pid for p in processes}
    wait_until(lambda: registered() == pids, 240, "eight workers to register")
    live = store.live_workers(SystemClock().now())
    assert {w.concurrency for w in live} == {4}
    assert all({"per_key", "capped_all"} <= set(w.types) for w in live)

    service.enqueue_many(ORG, "per_key", [{"key": f"k{i % 5}"} for i in range(400)])
    service.enqueue_many(ORG, "capped_all", [{"n": i} for i in range(150)])

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
        with pg_engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT type, concurrency_key, status, attempts, count(*),"
                    " count(DISTINCT lease), min(heartbeat_at), min(run_at), now()"
                    " FROM jobs WHERE status <> 'done'"
                    " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3"
                )
            ).all()
        tails = [
            f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:]
            for log in sorted(Path(LOGS["dir"]).glob("*.log"))
        ]
        raise AssertionError(
            "the queue did not drain; what is left:\n"
            + "\n".join(map(str, rows))
            + "\n"
            + "\n".join(tails)
        ) from None
    with pg_engine.connect() as conn:
        ended = conn.execute(
            text("SELECT status, error FROM jobs WHERE status <> 'done' LIMIT 5")
        ).all()
    assert ended == [], f"jobs that did not succeed: {ended}"
    with pg_engine.connect() as conn:
        runs, unfinished, writers = conn.execute(
            text(
                "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL), count(DISTINCT pid)"
                " FROM flow_test_runs"
            )
        ).one()
        per_key = conn.execute(
            text(MAX_OVERLAP.format(same="b.key = a.key")), {"type": "per_key"}
        ).scalar_one()
        per_type = conn.execute(
            text(MAX_OVERLAP.format(same="true")), {"type": "capped_all"}
        ).scalar_one()
        attempts = conn.execute(text("SELECT DISTINCT attempts FROM jobs")).scalars().all()
    assert runs == 550
    assert unfinished == 0
    assert writers >= 2  # the queue was shared by the processes
    assert attempts == [1]  # a job passed over by a full key spent no attempt
    assert per_key == flow_registry.KEY_LIMIT  # reached, never exceeded
    assert per_type == flow_registry.TYPE_CAP

    for process in processes:
        process.send_signal(signal.SIGTERM)
    assert [p.wait(60) for p in processes] == [0] * PROCESSES
    assert registered() == set()  # each removed its row as it stopped
