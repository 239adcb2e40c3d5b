"""The module in a real deployment: ``jobs migrate``, ``jobs api`` and ``jobs worker``
processes that load it through its declaration, a real HTTP site, ``kill -9``."""

from __future__ import annotations

import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa
from jobs_core import Job, JobFilter, JobService, Status, SystemClock
from jobs_core.modules import ModuleContext
from jobs_linkcheck.jobs import CRAWL, FETCH
from jobs_linkcheck.module import module
from jobs_linkcheck.tables import crawls, results
from sqlalchemy import Engine

from examples.linkcheck.tests.database import scratch_database
from examples.linkcheck.tests.processes import Process, deployment_env, jobs
from examples.linkcheck.tests.site import chain_site, serving, small_site

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ORG = "acme"


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def workdir() -> Iterator[Path]:
    """The processes' logs (a directory of this test's own)."""
    with tempfile.TemporaryDirectory(prefix="jobs-linkcheck-") as path:
        yield Path(path)


@pytest.fixture
def spawn(workdir: Path) -> Iterator[Callable[..., Process]]:
    """Start ``jobs`` processes; every one still running at the end is stopped."""
    started: list[Process] = []

    def start(env: dict[str, str], *args: str) -> Process:
        process = Process(env, workdir / f"{args[0]}-{len(started)}.log", *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()


def fetched_urls(engine: Engine, crawl_id: uuid.UUID) -> set[str]:
    with engine.connect() as conn:
        return set(
            conn.scalars(
                sa.select(results.c.url).where(
                    results.c.crawl_id == crawl_id, results.c.fetched_at.is_not(None)
                )
            )
        )


def crawl_status(engine: Engine, crawl_id: uuid.UUID) -> str | None:
    with engine.connect() as conn:
        return conn.scalar(sa.select(crawls.c.status).where(crawls.c.id == crawl_id))


def test_jobs_migrate_runs_the_module_chain(pg_server: str) -> None:
    with scratch_database(pg_server, "jobs_linkcheck_migrate") as url:
        env = deployment_env(url)
        jobs(env, "migrate")
        jobs(env, "migrate")  # idempotent
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            with engine.connect() as conn:
                version = conn.scalar(sa.text("SELECT version_num FROM alembic_version_linkcheck"))
                tables = set(sa.inspect(conn).get_table_names())
        finally:
            engine.dispose()
    assert version == "0001_linkcheck"
    assert {"jobs", "linkcheck_crawls", "linkcheck_results"} <= tables


@pytest.fixture
def service(engine: Engine, module_context: ModuleContext) -> JobService:
    """The job use cases on the session database, on real time (as the processes are)."""
    from jobs_postgres.store import PostgresJobStore

    real_time = replace(module_context, clock=SystemClock())
    return JobService(PostgresJobStore(engine), module.registry(real_time), real_time.clock)


def test_a_crawl_killed_mid_way_resumes_and_fetches_nothing_twice_that_was_recorded(
    database_url: str, engine: Engine, service: JobService, spawn: Callable[..., Process]
) -> None:
    """kill -9 of the worker in the middle of a crawl of 30 slow pages; a new worker sweeps
    the dead one's jobs back and the crawl ends with every page checked. A page whose fetch
    was recorded before the kill is never fetched again; only the fetches that were running
    at the kill (at most the site's limit, 2) are fetched a second time."""
    env = deployment_env(database_url)
    with serving(chain_site(30, delay_s=0.3)) as site:
        payload = {"site": site.site, "start_url": site.url("/"), "max_pages": 30}
        crawl = service.enqueue(ORG, CRAWL, payload).job
        first = spawn(env, "worker", "--concurrency", "4")
        wait_for(
            lambda: len(fetched_urls(engine, crawl.id)) >= 8 and running_fetches(service),
            60,
            "8 pages fetched and a fetch running",
        )
        first.kill9()
        recorded = fetched_urls(engine, crawl.id)
        hits_at_kill = sum(site.hits.values())
        running = running_fetches(service)  # held by the dead worker until the sweep
        assert 0 < len(running) <= 2
        assert len(recorded) < 30, "the kill came before the end"

        second = spawn(env, "worker", "--concurrency", "4")
        wait_for(
            lambda: service.get(ORG, crawl.id).status is Status.DONE,
            90,
            f"the crawl to end:\n{second.log()}",
        )
        hits = dict(site.hits)
    assert crawl_status(engine, crawl.id) == "done"
    assert set(hits) == set(chain_site(30, 0))  # every page checked
    assert all(hits[urlsplit(url).path] == 1 for url in recorded)
    assert sum(hits.values()) - len(hits) <= len(running)
    assert sum(hits.values()) > hits_at_kill
    for job in running:  # swept back and run again by the second worker
        assert service.get(ORG, job.id).attempts == 2


@pytest.fixture
def deployment(database_url: str, spawn: Callable[..., Process]) -> tuple[str, str, str]:
    """A ``jobs api`` and a ``jobs worker`` on the session database: the API's base URL, a
    token of the org and a token of another org."""
    env = deployment_env(database_url)
    token = jobs(env, "token", "create", "--org", ORG).strip().splitlines()[-1]
    other = jobs(env, "token", "create", "--org", "other").strip().splitlines()[-1]
    api = spawn(env, "api", "--host", "127.0.0.1", "--port", str(free_port()))
    base = api.wait_for(r"Uvicorn running on (http://\S+)").group(1)
    spawn(env, "worker", "--concurrency", "4").wait_for("worker.started")
    return base, token, other


def test_the_routes_start_a_crawl_that_a_worker_runs_and_show_its_results(
    deployment: tuple[str, str, str],
) -> None:
    base, token, other = deployment
    auth = {"Authorization": f"Bearer {token}"}

    with serving(small_site()) as site, httpx.Client(base_url=base, timeout=10) as http:
        crawls_path = f"/linkcheck/sites/{site.site}/crawls"
        assert http.post(crawls_path, json={}).status_code == 401  # never anonymous
        body = {"start_url": site.url("/"), "max_pages": 50}
        started = http.post(crawls_path, json=body, headers=auth)
        assert started.status_code == 202, started.text
        crawl: dict[str, Any] = started.json()
        again = http.post(crawls_path, json=body, headers=auth)  # one active crawl per site
        assert (again.status_code, again.json()["id"]) == (200, crawl["id"])

        def crawl_now() -> dict[str, Any]:
            answer = http.get(f"{crawls_path}/{crawl['id']}", headers=auth)
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        wait_for(lambda: crawl_now()["status"] == "done", 60, "the crawl to end")
        assert (crawl_now()["pages"], crawl_now()["broken"]) == (10, 2)
        broken = http.get(f"{crawls_path}/{crawl['id']}/results?broken=true", headers=auth)
        assert broken.status_code == 200
        assert [
            (r["url"], r["status_code"], r["linked_from"]) for r in broken.json()["results"]
        ] == [
            (site.url("/error"), 500, [site.url("/b")]),
            (site.url("/missing"), 404, [site.url("/")]),
        ]
        everything = http.get(f"{crawls_path}/{crawl['id']}/results", headers=auth).json()
        assert len(everything["results"]) == 10
        other_org = http.get(
            f"{crawls_path}/{crawl['id']}", headers={"Authorization": f"Bearer {other}"}
        )
        assert other_org.status_code == 404
        listed = http.get(crawls_path, headers=auth).json()["crawls"]
        assert [c["id"] for c in listed] == [crawl["id"]]


def test_cancelling_a_crawl_over_http_stops_it_and_its_row_says_cancelled(
    deployment: tuple[str, str, str],
) -> None:
    """``POST /jobs/{crawl_id}/cancel`` on a crawl of 40 slow pages: the job ends cancelled
    (waiting for a wave of fetches, or asked to stop while it runs), the type's ``on_cancel``
    hook marks its row, and the fetches it had handed out fetch nothing more."""
    base, token, _ = deployment
    auth = {"Authorization": f"Bearer {token}"}
    with serving(chain_site(40, delay_s=0.3)) as slow, httpx.Client(base_url=base) as http:
        body = {"start_url": slow.url("/"), "max_pages": 40}
        crawl = http.post(f"/linkcheck/sites/{slow.site}/crawls", json=body, headers=auth).json()
        wait_for(lambda: sum(slow.hits.values()) >= 4, 60, "4 pages fetched")
        cancelled = http.post(f"/jobs/{crawl['id']}/cancel", headers=auth)
        assert cancelled.status_code in (200, 202), cancelled.text
        path = f"/linkcheck/sites/{slow.site}/crawls/{crawl['id']}"
        try:
            wait_for(
                lambda: http.get(path, headers=auth).json()["status"] == "cancelled",
                30,
                "the crawl's row to say cancelled",
            )
        except AssertionError:
            job = http.get(f"/jobs/{crawl['id']}", headers=auth).json()
            raise AssertionError(
                f"row: {http.get(path, headers=auth).json()}\njob: {job}"
            ) from None
        time.sleep(0.5)  # the fetches that were running end
        hits_after_cancel = sum(slow.hits.values())
        time.sleep(2)
        assert sum(slow.hits.values()) == hits_after_cancel  # the crawl stopped
        assert hits_after_cancel < 40
        assert http.get(f"/jobs/{crawl['id']}", headers=auth).json()["status"] == "cancelled"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def running_fetches(service: JobService) -> list[Job]:
    running = service.list_jobs(ORG, JobFilter(statuses=frozenset({Status.RUNNING}), limit=100))
    return [job for job in running if job.type == FETCH]
