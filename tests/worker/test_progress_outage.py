"""A progress write lost to a real database outage is reported as not written (issue 15).

A worker runs in process against the real PostgreSQL server through a proxy that cuts the
connection carrying the handler's progress write, before the server sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from jobs_core import FakeClock, JobContext, JobService, JobType, Registry, Status
from jobs_postgres.database import create_engine
from jobs_postgres.store import PostgresJobStore
from jobs_postgres.wakeup import PostgresWakeup
from jobs_worker.worker import Worker
from sqlalchemy import Engine

from tests.postgres.proxy import CuttingProxy
from tests.worker.helpers import FAST, ORG, job_of, running, wait_until


@pytest.fixture
def cut_store(pg_url: str, pg_engine: Engine) -> Iterator[tuple[PostgresJobStore, CuttingProxy]]:
    proxy = CuttingProxy(pg_url, b"SET progress = CAST", after_reply=False)
    engine = create_engine(proxy.url, pool_size=4)
    try:
        yield PostgresJobStore(engine), proxy
    finally:
        engine.dispose()
        proxy.close()


def test_a_forced_progress_write_cut_by_an_outage_is_not_reported_saved(
    pg_url: str, cut_store: tuple[PostgresJobStore, CuttingProxy]
) -> None:
    store, proxy = cut_store
    results: dict[str, Any] = {}
    done = threading.Event()

    def checkpointing(ctx: JobContext) -> Mapping[str, Any]:
        results["first"] = ctx.report_progress(done=1, total=2, force=True)
        results["cut"] = proxy.cut.is_set()
        results["second"] = ctx.report_progress(done=2, total=2, force=True)
        results["cancelled"] = ctx.cancelled
        done.set()
        return {}

    registry = Registry("test")
    registry.register(JobType("checkpointing", checkpointing))
    service = JobService(store, registry, FakeClock())
    job = service.enqueue(ORG, "checkpointing").job
    with running(Worker(service, PostgresWakeup(pg_url), FAST)):
        wait_until(lambda: job_of(store, job.id).status is Status.DONE, what="the job done")
    assert results == {"first": False, "cut": True, "second": True, "cancelled": False}
    progress = job_of(store, job.id).progress
    assert progress is not None
    assert progress["done"] == 2
