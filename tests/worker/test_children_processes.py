"""Children and kill -9 (decision 0038): a real worker process killed between its handler's
return and the commit of the outcome leaves no child behind, and the re-run by another worker
enqueues them exactly once."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_worker.registries import compose
from sqlalchemy import text

from tests.worker import children_registry, exec_registry
from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CHILDREN = 5
EXTRA = {"JOBS_EXTRA_REGISTRIES": "tests.worker.children_registry:registry"}


@pytest.fixture
def service(pg_engine: Engine) -> JobService:
    from jobs_postgres import PostgresJobStore

    with pg_engine.begin() as conn:
        conn.execute(text(exec_registry.EXECUTIONS_DDL))
        conn.execute(text("TRUNCATE worker_test_executions"))
    registry = compose([children_registry.registry], "children-tests")
    return JobService(PostgresJobStore(pg_engine), registry, SystemClock())


def _count(engine: Engine, query: str, **params: object) -> int:
    with engine.connect() as conn:
        found: int = conn.execute(text(query), params).scalar_one()
    return found


def _finish_waits_on_the_row(engine: Engine, app_name: str) -> bool:
    """Whether a connection of the worker is waiting on a row lock with the finish statement."""
    return (
        _count(
            engine,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app"
            " AND wait_event_type = 'Lock' AND query LIKE '%finished%'",
            app=app_name,
        )
        > 0
    )


def test_kill_9_between_the_handler_and_the_outcome_leaves_no_child_and_the_rerun_makes_them_once(
    pg_url: str, pg_engine: Engine, service: JobService, workdir: Path
) -> None:
    children = "SELECT count(*) FROM jobs WHERE parent_id = :id"
    runs = "SELECT count(*) FROM worker_test_executions WHERE job_id = :id"
    gate: Connection = pg_engine.connect()
    gate.execute(text("SELECT pg_advisory_lock(:key)"), {"key": children_registry.GATE})
    gate.commit()
    first = WorkerProcess(pg_url, workdir / "first.log", EXTRA)
    second: WorkerProcess | None = None
    try:
        parent = service.enqueue(ORG, "fan_out", {"children": CHILDREN}).job
        wait_until(lambda: _count(pg_engine, runs, id=parent.id) == 1, 60, "the first run")
        # The handler waits at the gate: lock the parent's row, then open the gate. The
        # handler returns with its children, and the outcome's write waits on the row.
        with pg_engine.connect() as row_lock:
            row_lock.execute(
                text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"), {"id": parent.id}
            )
            gate.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": children_registry.GATE})
            gate.commit()
            wait_until(
                lambda: _finish_waits_on_the_row(pg_engine, first.app_name),
                30,
                "the outcome's write to wait on the row",
            )
            first.signal(signal.SIGKILL)
            assert first.wait_exit() == -signal.SIGKILL
            row_lock.rollback()
        wait_until(
            lambda: (
                _count(
                    pg_engine,
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app",
                    app=first.app_name,
                )
                == 0
            ),
            30,
            "the killed worker's connections to end",
        )
        assert job_of(service.store, parent.id).status is Status.RUNNING  # a zombie
        assert _count(pg_engine, children, id=parent.id) == 0  # no child left behind

        second = WorkerProcess(pg_url, workdir / "second.log", EXTRA)
        wait_until(lambda: job_of(service.store, parent.id).status is Status.DONE, 60, "the re-run")
        done = job_of(service.store, parent.id)
        assert done.attempts == 2
        assert _count(pg_engine, runs, id=parent.id) == 2
        assert _count(pg_engine, children, id=parent.id) == CHILDREN  # once, not twice
        wait_until(
            lambda: (
                _count(
                    pg_engine,
                    "SELECT count(*) FROM jobs WHERE parent_id = :id AND status = 'done'",
                    id=parent.id,
                )
                == CHILDREN
            ),
            60,
            "the children to run",
        )
        assert (
            _count(
                pg_engine,
                "SELECT count(DISTINCT org_id) FROM jobs WHERE parent_id = :id",
                id=parent.id,
            )
            == 1
        )
    finally:
        gate.close()
        first.close()
        if second is not None:
            second.close()
