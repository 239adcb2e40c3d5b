"""The job types on a real database against real sites, run by jobs-core's testing kit
(``JobsHarness``: the real runner in the test's thread, its release pass for the crawl's waits)
and, for
the per-site limit, by a real worker with several slots."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from jobs_core import CancelReason, Job, JobService, Status
from jobs_core.modules import ModuleContext
from jobs_core.testing import JobsHarness
from jobs_linkcheck.jobs import CRAWL, FETCH
from jobs_linkcheck.module import module
from jobs_linkcheck.tables import crawls, results
from sqlalchemy import Engine

from examples.linkcheck.tests.site import Page, chain_site, serving, small_site

pytestmark = pytest.mark.postgres

SMALL_SITE_STATUSES = {
    "/": 200,
    "/a": 200,
    "/b": 200,
    "/c": 200,
    "/moved": 301,
    "/missing": 404,
    "/error": 500,
    "/slow": 200,
    "/d": 200,
    "/doc.pdf": 200,
}


def crawl_payload(site: str, start_url: str, max_pages: int = 100) -> dict[str, Any]:
    return {"site": site, "start_url": start_url, "max_pages": max_pages}


def crawl_row(engine: Engine, crawl_id: uuid.UUID) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(crawls).where(crawls.c.id == crawl_id)).one()._mapping)


def statuses(engine: Engine, crawl_id: uuid.UUID, base: str) -> dict[str, int | None]:
    """The recorded status of each checked URL, by path."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(results.c.url, results.c.status_code).where(
                results.c.crawl_id == crawl_id, results.c.fetched_at.is_not(None)
            )
        )
        return {row.url.removeprefix(base) or "/": row.status_code for row in rows}


def test_a_crawl_checks_every_reachable_page_once_and_records_its_status(
    harness: JobsHarness, engine: Engine
) -> None:
    with serving(small_site()) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        harness.drain()
        hits = dict(site.hits)
    done = harness.service.get(crawl.org_id, crawl.id)
    assert done.status is Status.DONE, done.error
    assert done.report == {"pages": 10, "broken": 2, "dropped": 0}
    assert statuses(engine, crawl.id, site.url("")) == SMALL_SITE_STATUSES
    assert hits == dict.fromkeys(SMALL_SITE_STATUSES, 1)  # never twice; never /orphan
    row = crawl_row(engine, crawl.id)
    assert (row["status"], row["pages"], row["broken"]) == ("done", 10, 2)
    assert row["finished_at"] is not None
    fetches = harness.jobs(FETCH)
    assert len(fetches) == 10
    assert {fetch.status for fetch in fetches} == {Status.DONE}
    # the frontier is the job's private checkpoint; its public progress only counts
    assert done.progress is not None
    assert "frontier" not in done.progress
    assert (done.progress["done"], done.progress["total"]) == (10, 10)
    checkpoint = harness.checkpoint_of(done)
    assert checkpoint is not None
    assert sorted(checkpoint["done"]) == sorted(site.url(p) for p in SMALL_SITE_STATUSES)


def test_one_active_crawl_per_site(harness: JobsHarness) -> None:
    with serving(small_site()) as site:
        first = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        again = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/a"), max_pages=5))
        assert again.id == first.id  # the crawl of that site that is still active
        harness.drain()
        later = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        assert later.id != first.id  # the first one has ended
        harness.drain()
    assert harness.service.get(later.org_id, later.id).status is Status.DONE


def test_the_page_limit_stops_the_crawl_and_counts_what_it_left(harness: JobsHarness) -> None:
    with serving(chain_site(20, delay_s=0)) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/"), max_pages=5))
        harness.drain()
        fetched = sum(site.hits.values())
    done = harness.service.get(crawl.org_id, crawl.id)
    assert done.report is not None
    assert (done.report["pages"], fetched) == (5, 5)
    assert done.report["dropped"] > 0


def test_a_crawl_cancelled_while_it_waits_for_a_wave_stops_and_its_row_says_cancelled(
    harness: JobsHarness, engine: Engine
) -> None:
    """Between two waves the crawl waits for its fetches (``waiting``, no slot): a cancel ends
    it at once, its ``on_cancel`` hook marks the row, and the fetches it had handed out fetch
    nothing."""
    with serving(chain_site(10, delay_s=0)) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        harness.run_next(CRAWL)  # the first wave: "/"
        harness.run_next(FETCH)
        harness.run_next(CRAWL)  # run again: the second wave
        assert harness.service.get(crawl.org_id, crawl.id).status is Status.WAITING
        handed_out = harness.jobs(FETCH, status=Status.QUEUED)
        assert handed_out
        assert all(fetch.parent_id == crawl.id for fetch in handed_out)
        fetched_before = sum(site.hits.values())
        harness.cancel(crawl)
        harness.drain()
        fetched_after = sum(site.hits.values())
    assert harness.service.get(crawl.org_id, crawl.id).status is Status.CANCELLED
    assert crawl_row(engine, crawl.id)["status"] == "cancelled"
    assert fetched_after == fetched_before
    for fetch in handed_out:
        ended = harness.service.get(fetch.org_id, fetch.id)
        assert (ended.status, ended.report) == (Status.DONE, {"skipped": "the crawl is cancelled"})


def test_a_crawl_cancelled_while_its_step_runs_ends_cancelled(
    harness: JobsHarness, engine: Engine
) -> None:
    with serving(small_site()) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        ended = harness.run_next(CRAWL, cancel=CancelReason.REQUESTED, at_progress=1)
    assert ended is not None
    assert ended.status is Status.CANCELLED
    harness.run_end_hooks()
    assert crawl_row(engine, crawl.id)["status"] == "cancelled"


def test_a_run_handed_back_at_shutdown_resumes_from_its_checkpoint(
    harness: JobsHarness, engine: Engine
) -> None:
    """The worker stops a run of the crawl after it saved the frontier of its next wave and
    before that run's outcome was written: the job goes back to the queue with its attempt
    refunded, no fetch of that wave exists, and the next run hands the same wave out. Nothing is
    fetched twice."""
    with serving(small_site()) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        harness.run_next(CRAWL)
        harness.run_next(FETCH)  # "/" is fetched
        back = harness.run_next(CRAWL, cancel=CancelReason.SHUTDOWN, at_progress=1)
        assert back is not None
        assert (back.status, back.attempts) == (Status.QUEUED, 0)
        checkpoint = harness.checkpoint_of(back)
        assert checkpoint is not None
        assert checkpoint["done"] == [site.url("/")]
        assert len(checkpoint["pending"]) == 5  # the wave handed out before the stop
        assert harness.jobs(FETCH, status=Status.QUEUED) == []  # written with no outcome
        harness.drain()
        hits = dict(site.hits)
    done = harness.service.get(crawl.org_id, crawl.id)
    assert done.status is Status.DONE
    assert hits == dict.fromkeys(SMALL_SITE_STATUSES, 1)
    assert crawl_row(engine, crawl.id)["status"] == "done"
    assert len(harness.jobs(FETCH)) == len(SMALL_SITE_STATUSES)  # one fetch per URL


def test_a_fetch_that_fails_for_good_settles_its_url_and_the_crawl_ends(
    harness: JobsHarness, engine: Engine
) -> None:
    """``on_fail`` of the fetch type records the failure, or its crawl would wait forever."""
    with serving(small_site()) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        harness.run_next(CRAWL)
        failed = harness.run_next(FETCH, cancel=CancelReason.TIMEOUT)
        assert failed is not None
        assert failed.status is Status.FAILED
        harness.drain()
    done = harness.service.get(crawl.org_id, crawl.id)
    assert done.status is Status.DONE
    assert done.report == {"pages": 1, "broken": 1, "dropped": 0}  # "/" failed: no links
    with engine.connect() as conn:
        error = conn.scalar(sa.select(results.c.error).where(results.c.crawl_id == crawl.id))
    assert error is not None
    assert error.startswith("fetch job failed")


def test_a_private_site_is_not_fetched_unless_the_deployment_allows_it(
    module_context: ModuleContext, engine: Engine
) -> None:
    strict = replace(module_context, settings={})
    service = JobService(harness_store(engine), module.registry(strict), module_context.clock)
    harness = JobsHarness(service=service)
    with serving({"/": Page(links=("/a",))}) as site:
        crawl = harness.enqueue(CRAWL, crawl_payload(site.site, site.url("/")))
        harness.drain()
        assert site.hits == {}
    done = harness.service.get(crawl.org_id, crawl.id)
    assert done.report == {"pages": 1, "broken": 1, "dropped": 0}
    with engine.connect() as conn:
        error = conn.scalar(sa.select(results.c.error).where(results.c.crawl_id == crawl.id))
    assert error is not None
    assert "not a public address" in error


def test_fetches_of_a_site_never_run_more_than_its_limit_at_once(
    engine: Engine, worker: Callable[..., AbstractContextManager[JobService]]
) -> None:
    """Two sites crawled together by a real worker of 8 slots: each site sees at most two
    requests at once (``JOBS_LINKCHECK_FETCHES_PER_SITE``, default 2), and does see two; a full
    site never holds the other back."""
    with (
        serving(chain_site(12, delay_s=0.2)) as one,
        serving(chain_site(12, delay_s=0.2)) as two,
        worker(concurrency=8) as service,
    ):
        jobs = [
            service.enqueue("acme", CRAWL, crawl_payload(s.site, s.url("/"))).job
            for s in (one, two)
        ]
        done = [wait_ended(service, job) for job in jobs]
    assert [job.status for job in done] == [Status.DONE, Status.DONE]
    assert [job.report["pages"] for job in done if job.report] == [12, 12]
    assert one.max_concurrent == two.max_concurrent == 2


def test_fetches_of_a_site_never_start_more_than_its_rate(
    engine: Engine, worker: Callable[..., AbstractContextManager[JobService]]
) -> None:
    """A real worker of 8 slots crawls a site of 16 quick pages at 4 fetches per second
    (``JOBS_LINKCHECK_FETCHES_PER_SECOND``): no more than 4 of its fetches start within any one
    second, and the crawl still ends with every page. A start is the claim's instant (the
    attempt's ``started_at``); the request reaches the site a few milliseconds later, so the
    site's own clock may see 5 within a second by that jitter (docs/flow-control.md)."""
    with (
        serving(chain_site(16, delay_s=0.0)) as site,
        worker(concurrency=8, JOBS_LINKCHECK_FETCHES_PER_SECOND="4") as service,
    ):
        crawl = service.enqueue("acme", CRAWL, crawl_payload(site.site, site.url("/"))).job
        done = wait_ended(service, crawl)
    assert done.status is Status.DONE
    assert done.report is not None
    assert done.report["pages"] == 16
    assert len(site.started) == 16
    with engine.connect() as conn:
        starts = conn.execute(
            sa.text(
                "SELECT a.started_at FROM job_attempts a JOIN jobs j ON j.id = a.job_id"
                " WHERE j.parent_id = :crawl ORDER BY a.started_at"
            ),
            {"crawl": crawl.id},
        ).scalars()
        started = [at.timestamp() for at in starts]
    assert len(started) == 16
    assert busiest_second(started) == 4  # held to the rate, and reached it


def busiest_second(times: list[float]) -> int:
    """The most of ``times`` (seconds, in order) within any one second (a sliding window)."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


def harness_store(engine: Engine) -> Any:
    from jobs_postgres.store import PostgresJobStore

    return PostgresJobStore(engine)


def wait_ended(service: JobService, job: Job, timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while (now := service.get(job.org_id, job.id)).status not in (
        Status.DONE,
        Status.FAILED,
        Status.CANCELLED,
    ):
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job.id} did not end in {timeout} s: {now.status}")
        time.sleep(0.05)
    return now
