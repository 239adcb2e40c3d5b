"""The worker in process on the real PostgreSQL store and its LISTEN/NOTIFY wake-up."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import JobContext, JobService, JobType, Status, SystemClock
from jobs_worker.demo import registry as demo
from jobs_worker.registries import compose
from jobs_worker.worker import Worker

from tests.worker.helpers import FAST, ORG, job_of, running, wait_until

if TYPE_CHECKING:
    from jobs_postgres.store import PostgresJobStore

pytestmark = pytest.mark.postgres


def _worker(pg_url: str, service: JobService, **config: Any) -> Worker:
    from jobs_postgres.wakeup import PostgresWakeup

    return Worker(service, PostgresWakeup(pg_url), dataclasses.replace(FAST, **config))


def test_an_idle_worker_is_woken_by_the_enqueue_not_by_its_poll(
    pg_url: str, pg_store: PostgresJobStore
) -> None:
    service = JobService(pg_store, demo, SystemClock())
    # A poll so slow that only the NOTIFY can start the job within the wait below.
    worker = _worker(pg_url, service, poll_interval_s=60)
    with running(worker):
        wait_until(lambda: worker._kick.is_set() is False and worker.stats["claimed"] == 0)
        job = service.enqueue(ORG, "noop").job
        wait_until(lambda: job_of(pg_store, job.id).status is Status.DONE, 20, "the wake-up")


def test_a_running_job_is_cancelled_through_the_database(
    pg_url: str, pg_store: PostgresJobStore
) -> None:
    service = JobService(pg_store, demo, SystemClock())
    job = service.enqueue(ORG, "sleep", {"seconds": 600}).job
    with running(_worker(pg_url, service, cancel_check_s=0.2)):
        wait_until(lambda: job_of(pg_store, job.id).status is Status.RUNNING, 20)
        service.cancel(ORG, job.id)
        wait_until(lambda: job_of(pg_store, job.id).status is Status.CANCELLED, 10)
    assert job_of(pg_store, job.id).report == {"reason": "cancellation requested"}


def test_an_outcome_the_store_cannot_encode_fails_its_job_and_spares_the_batch(
    pg_url: str, pg_store: PostgresJobStore
) -> None:
    def odd(ctx: JobContext) -> Mapping[str, Any]:
        return {"cell": "a\x00b"}  # a NUL read from a file: jsonb refuses \u0000

    registry = compose([demo])
    registry.register(JobType("odd", odd))
    service = JobService(pg_store, registry, SystemClock())
    bad = service.enqueue(ORG, "odd").job
    good = service.enqueue_many(ORG, "noop", [{}] * 20)
    with running(_worker(pg_url, service, concurrency=4)):
        wait_until(lambda: job_of(pg_store, bad.id).status is Status.FAILED, 20)
        wait_until(lambda: all(job_of(pg_store, j.id).status is Status.DONE for j in good), 20)
    failed = job_of(pg_store, bad.id)
    assert failed.error is not None
    assert failed.error.startswith("the job's outcome could not be recorded: ")


@pytest.mark.parametrize(("setting", "expected"), [(None, "on"), ("0", "off"), ("1", "on")])
def test_the_workers_sessions_commit_synchronously_unless_told_not_to(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, setting: str | None, expected: str
) -> None:
    from jobs_worker.containers import build_container
    from jobs_worker.settings import WorkerSettings
    from sqlalchemy import text

    monkeypatch.setenv("JOBS_DATABASE_URL", pg_url)
    if setting is not None:
        monkeypatch.setenv("JOBS_SYNCHRONOUS_COMMIT", setting)
    container = build_container(WorkerSettings(), demo)
    try:
        with container.engine().connect() as conn:
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == expected
            assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "off"
    finally:
        container.shutdown_resources()
