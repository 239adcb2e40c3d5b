"""A real worker process serves its Prometheus metrics on ``--metrics-port`` (issue 24): scraped
over real HTTP, parsed with ``prometheus_client``'s parser, after it ran real jobs on the
session's PostgreSQL."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_worker.demo import registry as demo_registry

from tests.scrape import samples
from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def metered(pg_url: str) -> Iterator[WorkerProcess]:
    """A worker process of three slots serving its metrics on a free port."""
    with tempfile.TemporaryDirectory(prefix="jobs-worker-metrics-") as path:
        process = WorkerProcess(
            pg_url, Path(path) / "worker.log", {"JOBS_CONCURRENCY": "3", "JOBS_METRICS_PORT": "0"}
        )
        try:
            yield process
        finally:
            process.close()


def test_the_worker_serves_its_metrics(pg_engine: Engine, metered: WorkerProcess) -> None:
    from jobs_postgres.store import PostgresJobStore

    metered.wait_started()
    wait_until(lambda: "event=worker.metrics" in metered.log(), 30, "the metrics server")
    match = re.search(r"url=(http://\S+/metrics)", metered.log())
    assert match, metered.log()
    url = match.group(1)

    service = JobService(PostgresJobStore(pg_engine), demo_registry, SystemClock())
    jobs = [service.enqueue(ORG, "noop").job for _ in range(3)]
    jobs.append(service.enqueue(ORG, "fail", {"message": "no luck"}).job)
    store = service.store
    wait_until(
        lambda: all(job_of(store, j.id).status.is_finished for j in jobs),
        30,
        "the jobs to finish",
    )
    assert job_of(store, jobs[-1].id).status is Status.FAILED

    response = httpx.get(url, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    seen = samples(response.text)

    assert seen[("jobs_finished_total", (("outcome", "done"), ("type", "noop")))] == 3
    assert seen[("jobs_finished_total", (("outcome", "failed"), ("type", "fail")))] == 1
    assert seen[("jobs_attempt_duration_seconds_count", (("type", "noop"),))] == 3
    assert seen[("jobs_queue_wait_seconds_count", (("type", "noop"),))] == 3
    assert seen[("jobs_worker_slots", ())] == 3
    assert seen[("jobs_worker_slots_busy", ())] == 0
    assert seen[("jobs_finish_duration_seconds_count", ())] >= 1
    assert seen[("jobs_claim_duration_seconds_count", ())] >= 1
    assert seen[("jobs_store_outages_total", ())] == 0
    jobs_labels = {
        name for metric, pairs in seen if metric.startswith("jobs_") for name, _ in pairs
    }
    assert jobs_labels <= {"type", "outcome", "le"}  # never a job's or an org's id
