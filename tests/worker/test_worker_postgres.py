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
        wait_until(lambda: worker.shared.looks > 0 and worker.stats["claimed"] == 0)
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
    from jobs_worker.composition import Composition
    from jobs_worker.settings import WorkerSettings
    from sqlalchemy import text

    monkeypatch.setenv("JOBS_DATABASE_URL", pg_url)
    if setting is not None:
        monkeypatch.setenv("JOBS_SYNCHRONOUS_COMMIT", setting)
    parts = Composition(WorkerSettings(), demo)
    try:
        with parts.engine().connect() as conn:
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == expected
            assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "off"
            # the scheduler's and the purge's statements keep plans made for their values
            assert conn.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
        # the job store's sessions: the same, and one generic plan per statement
        with parts.store_engine().connect() as conn:
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == expected
            assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "off"
            assert conn.execute(text("SHOW plan_cache_mode")).scalar_one() == "force_generic_plan"
        from jobs_postgres.store import PostgresJobStore as Store

        store = parts.store()
        assert isinstance(store, Store)
        assert store.engine is parts.store_engine()
    finally:
        parts.close()


@pytest.mark.slow
def test_a_256_mb_report_fails_its_job_quickly_and_the_jobs_behind_it_run(
    pg_url: str, pg_store: PostgresJobStore
) -> None:
    """Issue 11: PostgreSQL refuses such a report (SQLSTATE 54000), which was taken for an
    outage: the outcome was retried "until written" while the job held the only slot."""

    def huge(ctx: JobContext) -> Mapping[str, Any]:
        return {"blob": "x" * (256 * 1024 * 1024)}

    registry = compose([demo])
    registry.register(JobType("huge", huge))
    service = JobService(pg_store, registry, SystemClock())
    bad = service.enqueue(ORG, "huge").job
    behind = service.enqueue_many(ORG, "noop", [{}] * 5)
    with running(_worker(pg_url, service, concurrency=1)):
        wait_until(lambda: job_of(pg_store, bad.id).status is Status.FAILED, 60, "the failure")
        wait_until(lambda: all(job_of(pg_store, j.id).status is Status.DONE for j in behind), 30)
    failed = job_of(pg_store, bad.id)
    assert failed.attempts == 1
    assert failed.error is not None
    assert "more than the 1.0 MiB a job may hold" in failed.error
    assert failed.report is not None
    assert failed.report["exception_type"] == "DocumentTooLarge"


def test_a_progress_document_the_store_refuses_fails_the_attempt_at_once(
    pg_url: str, pg_store: PostgresJobStore
) -> None:
    """A refusal (here jsonb refusing a NUL, SQLSTATE 22P05) is not an outage: the handler gets
    StoreRefused at once instead of a progress silently dropped, and the job is not retried."""
    seen: list[str] = []

    def odd_progress(ctx: JobContext) -> None:
        try:
            ctx.report_progress(1, 2, force=True, cell="a\x00b")
        except Exception as error:
            seen.append(type(error).__name__)
            raise

    registry = compose([demo])
    registry.register(JobType("odd_progress", odd_progress))
    service = JobService(pg_store, registry, SystemClock())
    job = service.enqueue(ORG, "odd_progress").job
    with running(_worker(pg_url, service)):
        wait_until(lambda: job_of(pg_store, job.id).status is Status.FAILED, 20)
    assert seen == ["StoreRefused"]
    failed = job_of(pg_store, job.id)
    assert failed.attempts == 1
    assert failed.error is not None
    assert failed.error.startswith("StoreRefused: the job store refused the data (SQLSTATE 22")
