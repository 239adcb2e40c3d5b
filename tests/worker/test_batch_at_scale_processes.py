"""One batch of 10,000 members finishing on 8 worker processes at once (decision 0041, issue 25):
their ends are recorded by whichever finish ends each, taken by every worker's release pass
concurrently, and the callback is released once and runs once."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_core.waits import MAX_BATCH
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import text

from tests.worker import waits_registry
from tests.worker.helpers import ORG, wait_until
from tests.worker.test_waits_processes import _spawn

if TYPE_CHECKING:
    from sqlalchemy import Engine

# Eight workers of four slots hold most of the server's connections: no other test beside it.
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.alone]

WORKERS = 8


@pytest.fixture
def eight(pg_url: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.extend(_spawn(pg_url, tmp_path / f"worker-{i}.log") for i in range(WORKERS))
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def test_ten_thousand_members_on_eight_workers_give_one_callback(
    pg_engine: Engine, eight: list[subprocess.Popen[bytes]]
) -> None:
    service = JobService(PostgresJobStore(pg_engine), waits_registry.registry, SystemClock())
    batch = service.enqueue_batch(
        ORG, [("quick", {"n": n}) for n in range(MAX_BATCH)], ("gather", {})
    )
    assert len(batch.members) == MAX_BATCH

    def callback_done() -> bool:
        return service.get(ORG, batch.callback.id).status is Status.DONE

    wait_until(callback_done, 300, "the callback to run")
    callback = service.get(ORG, batch.callback.id)
    assert callback.report == {
        "total": MAX_BATCH,
        "ended": MAX_BATCH,
        "counts": {"done": MAX_BATCH},
    }
    assert callback.attempts == 1
    with pg_engine.connect() as conn:
        kinds = conn.execute(
            text("SELECT kind, count(*) FROM job_events WHERE job_id = :id GROUP BY kind"),
            {"id": batch.callback.id},
        ).all()
        left = conn.execute(
            text(
                "SELECT (SELECT count(*) FROM jobs WHERE status = 'waiting'),"
                " (SELECT count(*) FROM job_wait_ends),"
                " (SELECT count(*) FROM job_waits WHERE ended IS NULL),"
                " (SELECT count(DISTINCT worker) FROM job_attempts)"
            )
        ).one()
    seen: dict[str, int] = dict(kinds)
    seen.pop("progress", None)  # its run's heartbeat, long enough to read 10,000 members
    assert seen == {"enqueued": 1, "requeued": 1, "claimed": 1, "done": 1}  # released, run once
    assert tuple(left)[:3] == (0, 0, 0)
    assert left[3] >= 2, "the members ran on one worker: the test proved less than it says"
