"""The job types on a real database, run by a real worker (on a thread), against real sites."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from jobs_core import Job, JobFilter, JobService, Status
from jobs_core.modules import ModuleContext
from jobs_linkcheck.jobs import CRAWL, FETCH
from jobs_linkcheck.module import module
from jobs_linkcheck.tables import crawls, results
from sqlalchemy import Engine

from examples.linkcheck.tests.site import Page, chain_site, serving, small_site

pytestmark = pytest.mark.postgres

ORG = "acme"


def wait_for(predicate: Callable[[], object], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def start(service: JobService, site: str, start_url: str, max_pages: int = 100) -> Job:
    payload = {"site": site, "start_url": start_url, "max_pages": max_pages}
    return service.enqueue(ORG, CRAWL, payload).job


def ended(service: JobService, job: Job, timeout: float = 60) -> Job:
    def finished() -> bool:
        return service.get(ORG, job.id).status in (Status.DONE, Status.FAILED, Status.CANCELLED)

    wait_for(finished, timeout, f"crawl {job.id} to end")
    return service.get(ORG, job.id)


def crawl_row(engine: Engine, crawl_id: uuid.UUID) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(crawls).where(crawls.c.id == crawl_id)).one()._mapping)


def statuses(engine: Engine, crawl_id: uuid.UUID) -> dict[str, int | None]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(results.c.url, results.c.status_code).where(results.c.crawl_id == crawl_id)
        )
        return {row.url: row.status_code for row in rows}


def test_a_crawl_checks_every_reachable_page_once_and_records_its_status(
    service: JobService, engine: Engine, worker: Callable[..., Any]
) -> None:
    with serving(small_site()) as site, worker(concurrency=4):
        job = ended(service, start(service, site.site, site.url("/")))
        hits = dict(site.hits)
    assert job.status is Status.DONE, job.error
    assert job.report == {"pages": 10, "broken": 2, "dropped": 0}
    assert statuses(engine, job.id) == {
        site.url("/"): 200,
        site.url("/a"): 200,
        site.url("/b"): 200,
        site.url("/c"): 200,
        site.url("/moved"): 301,
        site.url("/missing"): 404,
        site.url("/error"): 500,
        site.url("/slow"): 200,
        site.url("/d"): 200,
        site.url("/doc.pdf"): 200,
    }
    # every page fetched exactly once; never the orphan, never another site
    assert set(hits.values()) == {1}
    assert "/orphan" not in hits
    row = crawl_row(engine, job.id)
    assert (row["status"], row["pages"], row["broken"]) == ("done", 10, 2)
    assert row["finished_at"] is not None
    fetches = service.list_jobs(ORG, JobFilter(type=FETCH, limit=100))
    assert len(fetches) == 10
    assert {fetch.status for fetch in fetches} == {Status.DONE}


def test_fetches_of_a_site_never_run_more_than_its_limit_at_once(
    service: JobService, engine: Engine, worker: Callable[..., Any]
) -> None:
    """Two sites crawled together by a worker of 8 slots: each site sees at most two requests
    at once (``JOBS_LINKCHECK_FETCHES_PER_SITE``, default 2), and does see two; a full site
    never holds the other back."""
    with (
        serving(chain_site(12, delay_s=0.25)) as one,
        serving(chain_site(12, delay_s=0.25)) as two,
        worker(concurrency=8),
    ):
        jobs = [start(service, s.site, s.url("/")) for s in (one, two)]
        done = [ended(service, job) for job in jobs]
    assert [job.status for job in done] == [Status.DONE, Status.DONE]
    assert [job.report["pages"] for job in done if job.report] == [12, 12]
    assert one.max_concurrent == two.max_concurrent == 2


def test_one_active_crawl_per_site(
    service: JobService, engine: Engine, worker: Callable[..., Any]
) -> None:
    with serving(small_site()) as site:
        first = start(service, site.site, site.url("/"))
        again = service.enqueue(
            ORG, CRAWL, {"site": site.site, "start_url": site.url("/a"), "max_pages": 5}
        )
        assert (again.created, again.job.id) == (False, first.id)
        with worker(concurrency=4):
            ended(service, first)
            later = start(service, site.site, site.url("/"))  # the first one has ended
            assert later.id != first.id
            ended(service, later)
    assert service.get(ORG, later.id).status is Status.DONE


def test_the_page_limit_stops_the_crawl_and_counts_what_it_left(
    service: JobService, engine: Engine, worker: Callable[..., Any]
) -> None:
    with serving(chain_site(20, delay_s=0)) as site, worker(concurrency=4):
        job = ended(service, start(service, site.site, site.url("/"), max_pages=5))
        hits = sum(site.hits.values())
    assert job.status is Status.DONE
    assert job.report is not None
    assert job.report["pages"] == 5
    assert job.report["dropped"] > 0
    assert hits == 5


def test_a_private_site_is_not_fetched_unless_the_deployment_allows_it(
    module_context: ModuleContext, engine: Engine, worker: Callable[..., Any]
) -> None:
    from jobs_core import SystemClock
    from jobs_postgres.store import PostgresJobStore
    from jobs_postgres.wakeup import PostgresWakeup
    from jobs_worker.worker import Worker, WorkerConfig

    strict = module.registry(replace(module_context, settings={"JOBS_LINKCHECK_STEP_S": "0.1"}))
    service = JobService(PostgresJobStore(engine), strict, SystemClock())
    with serving({"/": Page(links=("/a",))}) as site:
        job = start(service, site.site, site.url("/"))
        config = WorkerConfig(concurrency=2, poll_interval_s=0.1)
        assert module_context.database_url is not None
        strict_worker = Worker(service, PostgresWakeup(module_context.database_url), config)
        import threading

        thread = threading.Thread(target=strict_worker.run, daemon=True)
        thread.start()
        try:
            job = ended(service, job)
        finally:
            strict_worker.stop()
            thread.join(20)
        assert site.hits == {}
    assert job.report == {"pages": 1, "broken": 1, "dropped": 0}
    with engine.connect() as conn:
        error = conn.scalar(sa.select(results.c.error).where(results.c.crawl_id == job.id))
    assert error is not None
    assert "not a public address" in error
