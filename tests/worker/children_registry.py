"""Job types for the children's kill -9 test, loaded by real workers through
``JOBS_EXTRA_REGISTRIES=tests.worker.children_registry:registry``.

``fan_out`` records its execution (``worker_test_executions``), then waits at a gate the test
holds (a PostgreSQL advisory lock), then enqueues ``payload["children"]`` children with
``ctx.enqueue_many`` and returns: the test holds the gate until it has locked the parent's row,
so the outcome's write waits on that lock, and the worker can be killed between the handler's
return and the outcome's commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry
from sqlalchemy import text

from tests.worker.exec_registry import _database, record

GATE = 250_038
"""The advisory lock key of the gate."""

registry = Registry("children-tests")


def fan_out(ctx: JobContext) -> Mapping[str, Any]:
    record(ctx)
    with _database().connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock_shared(:key)"), {"key": GATE})
        conn.execute(text("SELECT pg_advisory_unlock_shared(:key)"), {"key": GATE})
        conn.commit()
    count = int(ctx.payload["children"])
    ctx.enqueue_many("child", [{"n": n} for n in range(count)])
    return {"children": count}


registry.register(JobType("fan_out", fan_out, max_attempts=3))
registry.register(JobType("child", lambda ctx: {"n": ctx.payload["n"]}))
