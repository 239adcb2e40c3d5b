"""A paused type across a real worker process (issue 24): the worker runs the other types'
jobs and leaves the paused type's queued, even one enqueued before them; the resume wakes it
through ``jobs_new`` (its fallback poll is set far beyond the test's wait, so only the
notification can make the job run in time) and the job runs."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_worker.demo import registry as demo_registry

from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import PACE, WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

POLL_S = "60"
"""The worker's fallback poll: the most the settings allow, twice the longest wait below."""


@pytest.fixture
def worker(pg_url: str, pg_engine: Engine) -> Iterator[WorkerProcess]:
    """One worker process of two slots on the session's database (emptied by ``pg_engine``)."""
    with tempfile.TemporaryDirectory(prefix="jobs-pause-test-") as logs:
        process = WorkerProcess(
            pg_url,
            Path(logs, "worker.log"),
            {"JOBS_CONCURRENCY": "2"},
            {**PACE, "JOBS_POLL_INTERVAL_S": POLL_S},
        )
        try:
            yield process
        finally:
            process.close()


def test_a_paused_type_waits_in_a_real_worker_and_runs_once_resumed(
    pg_engine: Engine, worker: WorkerProcess
) -> None:
    from jobs_postgres.store import PostgresJobStore

    service = JobService(PostgresJobStore(pg_engine), demo_registry, SystemClock())
    service.pause_type("sleep", "tests")
    worker.wait_started()
    held = service.enqueue(ORG, "sleep", {"seconds": 0}).job
    marker = service.enqueue(ORG, "noop").job  # after the paused one, in claim order
    wait_until(lambda: job_of(service.store, marker.id).status is Status.DONE, 30, "the marker")
    # The worker claimed since the paused job was queued, and passed over it.
    waiting = job_of(service.store, held.id)
    assert waiting.status is Status.QUEUED
    assert waiting.attempts == 0
    assert next(r.code for r in service.why_waiting(waiting)) == "type_paused"

    assert service.resume_type("sleep") is True
    wait_until(
        lambda: job_of(service.store, held.id).status is Status.DONE,
        30,
        f"the resumed job (the worker's poll is {POLL_S} s: only the resume's NOTIFY wakes it)",
    )
    assert worker.alive(), worker.log()
