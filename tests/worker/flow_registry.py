"""Job types with concurrency limits for the multi-process flow control test, loaded by real
workers through ``JOBS_EXTRA_REGISTRIES=tests.worker.flow_registry:registry``.

Each execution writes its start and its end (the database's clock) into ``flow_test_runs`` of
the worker's own database, so the test can compute how many ran at once per key and per type.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry
from sqlalchemy import Engine, text

RUNS_DDL = """
CREATE TABLE IF NOT EXISTS flow_test_runs (
    job_id uuid NOT NULL,
    type text NOT NULL,
    key text,
    pid integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at timestamptz
)
"""

KEY_LIMIT = 2
TYPE_CAP = 3

registry = Registry("flow-tests")

_engine: Engine | None = None
_engine_lock = threading.Lock()


def _database() -> Engine:
    global _engine  # noqa: PLW0603 - one engine per worker process, made on first use
    with _engine_lock:
        if _engine is None:
            from jobs_postgres.database import create_engine

            _engine = create_engine(os.environ["JOBS_DATABASE_URL"], pool_size=4, max_overflow=0)
        return _engine


def recorded(ctx: JobContext) -> Mapping[str, Any]:
    """Record the start, work a little (10-40 ms), record the end."""
    key = ctx.payload.get("key")
    with _database().begin() as conn:
        conn.execute(
            text(
                "INSERT INTO flow_test_runs (job_id, type, key, pid) "
                "VALUES (:job_id, :type, :key, :pid)"
            ),
            {"job_id": ctx.job.id, "type": ctx.job.type, "key": key, "pid": os.getpid()},
        )
    time.sleep(random.uniform(0.01, 0.04))
    with _database().begin() as conn:
        conn.execute(
            text("UPDATE flow_test_runs SET ended_at = clock_timestamp() WHERE job_id = :job_id"),
            {"job_id": ctx.job.id},
        )
    return {"pid": os.getpid()}


registry.register(JobType("per_key", recorded, concurrency_key="key", concurrency_limit=KEY_LIMIT))
registry.register(JobType("capped_all", recorded, max_running=TYPE_CAP))
