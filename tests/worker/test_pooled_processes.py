"""Real worker processes through PgBouncer in transaction mode (``JOBS_DATABASE_POOLER``;
decision 0040): every job runs exactly once, and an idle worker is woken through ``LISTEN`` on
``JOBS_DIRECT_DATABASE_URL`` (or finds new jobs by its poll without one, and says so).
Skipped, with the reason, without pgbouncer."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, SystemClock
from jobs_worker.demo import registry as demo_registry
from jobs_worker.registries import compose
from sqlalchemy import text

from tests.pooling import PooledDatabase
from tests.worker import exec_registry
from tests.worker.helpers import ORG, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from jobs_postgres.store import PostgresJobStore
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.pooler, pytest.mark.slow]

POOLED = {
    "JOBS_DATABASE_POOLER": "transaction",
    "JOBS_EXTRA_REGISTRIES": "tests.worker.exec_registry:registry",
}


@pytest.fixture
def spawn() -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes through the pooler; whatever still runs at the end is killed."""
    started: list[WorkerProcess] = []
    with tempfile.TemporaryDirectory(prefix="jobs-pooled-test-") as workdir:

        def start(url: str, **env: str) -> WorkerProcess:
            log = Path(workdir) / f"worker-{len(started)}.log"
            worker = WorkerProcess(url, log, {**POOLED, **env})
            started.append(worker)
            return worker

        yield start
        for worker in started:
            worker.close()


@pytest.fixture
def service(pooled_store: PostgresJobStore, pooled_engine: Engine) -> JobService:
    """Enqueue and read jobs through the pooler."""
    with pooled_engine.begin() as conn:
        conn.execute(text(exec_registry.EXECUTIONS_DDL))
        conn.execute(text("TRUNCATE worker_test_executions"))
    registry = compose([demo_registry, exec_registry.registry], "pooled-worker-tests")
    return JobService(pooled_store, registry, SystemClock())


def _remaining(engine: Engine) -> int:
    with engine.connect() as conn:
        query = text("SELECT count(*) FROM jobs WHERE status <> 'done'")
        return int(conn.execute(query).scalar_one())


def _executions(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        query = text("SELECT count(*), count(DISTINCT job_id) FROM worker_test_executions")
        executions, distinct = conn.execute(query).one()
    return int(executions), int(distinct)


def _listening(direct: Engine, app_name: str) -> bool:
    with direct.connect() as conn:
        found = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = :app AND query ILIKE 'LISTEN%'"
            ),
            {"app": app_name},
        ).scalar_one()
    return bool(found)


def test_four_workers_through_the_pooler_run_each_job_once_on_the_pools_connections(
    pooled_url: str,
    pooled_database: PooledDatabase,
    pooled_engine: Engine,
    service: JobService,
    spawn: Callable[..., WorkerProcess],
) -> None:
    from jobs_postgres.database import create_engine

    direct = create_engine(pooled_database.direct, pooler="none", pool_size=1)
    try:
        workers = [
            spawn(pooled_url, JOBS_CONCURRENCY="4", JOBS_DIRECT_DATABASE_URL=pooled_database.direct)
            for _ in range(4)
        ]
        for worker in workers:
            worker.wait_started()
        for worker in workers:  # each woken by LISTEN on its own direct connection
            name = worker.app_name
            wait_until(lambda: _listening(direct, name), 30, "the worker's LISTEN")  # noqa: B023
        service.enqueue_many(ORG, "record", [{"n": n} for n in range(1000)])
        wait_until(lambda: _remaining(pooled_engine) == 0, 120, "the queue to drain")
        assert _executions(pooled_engine) == (1000, 1000)
        logs = "".join(worker.log() for worker in workers)
        assert "polls every" not in logs
        for worker in workers:
            worker.signal(signal.SIGTERM)
        assert [w.wait_exit() for w in workers] == [0, 0, 0, 0]
    finally:
        direct.dispose()


def test_without_a_direct_url_the_worker_polls_and_says_so(
    pooled_url: str,
    pooled_engine: Engine,
    service: JobService,
    spawn: Callable[..., WorkerProcess],
) -> None:
    worker = spawn(pooled_url, JOBS_CONCURRENCY="2", JOBS_POLL_INTERVAL_S="0.2")
    worker.wait_started()
    assert "polls every 0.2 s (JOBS_POLL_INTERVAL_S)" in worker.log()
    # and what the role must carry instead of the session settings it could not send
    assert "ALTER ROLE <worker role> SET enable_bitmapscan = 'off'" in worker.log()
    assert "SET timezone = 'UTC'" in worker.log()
    service.enqueue_many(ORG, "record", [{"n": n} for n in range(50)])
    wait_until(lambda: _remaining(pooled_engine) == 0, 60, "the queue to drain by polling")
    assert _executions(pooled_engine) == (50, 50)
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit() == 0
