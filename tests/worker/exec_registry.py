"""A job type for the worker process tests, loaded by real workers through
``JOBS_EXTRA_REGISTRIES=tests.worker.exec_registry:registry``.

``record`` inserts one row per execution into ``worker_test_executions`` of the worker's own
database (``JOBS_DATABASE_URL``), so a test can count how many times each job really ran.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry
from sqlalchemy import Engine, text

EXECUTIONS_DDL = """
CREATE TABLE IF NOT EXISTS worker_test_executions (
    job_id uuid NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    executed_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""

registry = Registry("worker-tests")

_engine: Engine | None = None
_engine_lock = threading.Lock()


def _database() -> Engine:
    global _engine  # noqa: PLW0603 - one engine per worker process, made on first use
    with _engine_lock:
        if _engine is None:
            from jobs_postgres.database import create_engine

            _engine = create_engine(os.environ["JOBS_DATABASE_URL"], pool_size=4)
        return _engine


def record(ctx: JobContext) -> Mapping[str, Any]:
    """Insert this execution's row and report the worker's pid."""
    with _database().begin() as conn:
        conn.execute(
            text(
                "INSERT INTO worker_test_executions (job_id, attempt, pid) "
                "VALUES (:job_id, :attempt, :pid)"
            ),
            {"job_id": ctx.job.id, "attempt": ctx.attempt, "pid": os.getpid()},
        )
    return {"pid": os.getpid()}


registry.register(JobType("record", record, description="Records its execution in a table."))
