"""Batches through real worker processes (decision 0041): three workers drain two batches of 300
members while one of them is killed with SIGKILL and replaced; every callback runs after all of
its members ended, and is released from waiting exactly once (one ``requeued`` event), none is
left waiting and no recorded end is left untaken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import text

from tests.worker import waits_registry
from tests.worker.helpers import ORG, wait_until

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = 300


def _spawn(pg_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        JOBS_DATABASE_URL=pg_url,
        JOBS_CONCURRENCY="4",
        JOBS_POLL_INTERVAL_S="0.2",
        JOBS_HEARTBEAT_S="0.5",  # the killed worker's runs are swept within seconds
        JOBS_SWEEP_INTERVAL_S="0.5",
        JOBS_SWEEP_THRESHOLD_S="4",
        JOBS_LEASE_MARGIN_S="0.8",
        JOBS_EXTRA_REGISTRIES="tests.worker.waits_registry:registry",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "jobs_worker"], cwd=ROOT, env=env, stdout=out, stderr=out
        )


@pytest.fixture
def workers(pg_url: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started = [_spawn(pg_url, tmp_path / f"worker-{i}.log") for i in range(3)]
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def test_each_callback_runs_once_after_its_members_through_a_kill(
    pg_engine: Engine, pg_url: str, tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    store = PostgresJobStore(pg_engine)
    service = JobService(store, waits_registry.registry, SystemClock())
    batches = [
        service.enqueue_batch(
            ORG, [("member", {"n": n}) for n in range(MEMBERS)], ("gather", {"batch": b})
        )
        for b in range(2)
    ]

    def ended() -> int:
        with pg_engine.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM jobs"
                        " WHERE type = 'member' AND finished_at IS NOT NULL"
                    )
                ).scalar_one()
            )

    def ran_by(process: subprocess.Popen[bytes]) -> int:
        """The attempts ``process`` ended (``job_attempts.worker`` is ``host:pid``)."""
        with pg_engine.connect() as conn:
            return int(
                conn.execute(
                    text("SELECT count(*) FROM job_attempts WHERE worker LIKE :worker"),
                    {"worker": f"%:{process.pid}"},
                ).scalar_one()
            )

    # The worker killed must be draining (its four slots busy), not still starting: on a loaded
    # machine one worker can start after the others ended a quarter of the members, and a kill
    # of it would cut no run. The one that ended the most attempts is killed.
    wait_until(
        lambda: ended() >= MEMBERS // 2 and max(map(ran_by, workers)) >= 10,
        120,
        "a quarter of the members to end, ten of them by one worker",
    )
    victim = max(workers, key=ran_by)
    victim.send_signal(signal.SIGKILL)  # its running members are swept and run again
    victim.wait(10)
    assert ended() < 2 * MEMBERS  # killed mid-drain
    workers.append(_spawn(pg_url, tmp_path / "worker-3.log"))

    def callbacks_done() -> bool:
        return all(service.get(ORG, b.callback.id).status is Status.DONE for b in batches)

    wait_until(callbacks_done, 180, "both callbacks to run")
    for batch in batches:
        callback = service.get(ORG, batch.callback.id)
        assert callback.report is not None
        assert callback.report["total"] == MEMBERS
        assert callback.report["ended"] == MEMBERS  # released only once every member ended
        assert callback.report["counts"] == {"done": 270, "failed": 30}
    with pg_engine.connect() as conn:
        releases = conn.execute(
            text(
                "SELECT job_id, count(*) FROM job_events WHERE kind = 'requeued'"
                " AND job_id = ANY(:ids) GROUP BY job_id"
            ),
            {"ids": [b.callback.id for b in batches]},
        ).all()
        left = conn.execute(
            text(
                "SELECT (SELECT count(*) FROM jobs WHERE status = 'waiting'),"
                " (SELECT count(*) FROM job_wait_ends),"
                " (SELECT count(*) FROM job_waits WHERE ended IS NULL)"
            )
        ).one()
        rerun = conn.execute(
            text("SELECT count(*) FROM jobs WHERE type = 'member' AND attempts > 1")
        ).scalar_one()
    assert sorted(count for _, count in releases) == [1, 1]  # released from waiting once each
    assert tuple(left) == (0, 0, 0)
    assert rerun >= 1, "the kill cut no member's run: the test proved less than it says"
