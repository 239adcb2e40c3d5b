"""Job types for the lease fence tests, loaded by real workers through
``JOBS_EXTRA_REGISTRIES=tests.worker.fence_registry:registry``.

Each execution writes a row in ``fence_test_executions`` when it starts and sets ``ended_at``
when its handler returns (whatever the reason), through its own connection to
``JOBS_TEST_RECORDER_URL``: the server reached directly, not through the worker's (silenced)
link. Two rows of one job whose intervals overlap are two executions at the same time.

- ``overlap`` runs ``payload["seconds"]`` seconds (``payload["retry_seconds"]``, if given, on
  every execution after the job's first one recorded: a fenced job handed back has its attempt
  refunded, so its re-run is attempt 1 again), checking its cancellation every 20 ms;
- ``progressing`` runs like ``overlap``, writing its progress every 20 ms;
- ``quick`` returns at once (its row is the proof a worker runs jobs);
- ``stuck`` (timeout 0.3 s) sleeps ``payload["seconds"]`` without ever looking at its
  cancellation, as code stuck in a blocking call would.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry
from sqlalchemy import Engine, text

RECORDER_DDL = """
CREATE TABLE IF NOT EXISTS fence_test_executions (
    job_id uuid NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at timestamptz,
    how text
)
"""

registry = Registry("fence-tests")

_engine: Engine | None = None
_engine_lock = threading.Lock()


def _recorder() -> Engine:
    global _engine  # noqa: PLW0603 - one engine per worker process, made on first use
    with _engine_lock:
        if _engine is None:
            from jobs_postgres.database import create_engine

            _engine = create_engine(os.environ["JOBS_TEST_RECORDER_URL"], pool_size=4)
        return _engine


def _started(ctx: JobContext) -> int:
    """Record the start of this execution; the number of the job's executions before it."""
    with _recorder().begin() as conn:
        earlier = conn.execute(
            text("SELECT count(*) FROM fence_test_executions WHERE job_id = :job_id"),
            {"job_id": ctx.job.id},
        ).scalar_one()
        conn.execute(
            text(
                "INSERT INTO fence_test_executions (job_id, attempt, pid) "
                "VALUES (:job_id, :attempt, :pid)"
            ),
            {"job_id": ctx.job.id, "attempt": ctx.attempt, "pid": os.getpid()},
        )
    return int(earlier)


def _seconds(ctx: JobContext, earlier: int) -> float:
    """``seconds`` on the job's first execution, ``retry_seconds`` (if given) on the later ones."""
    seconds = ctx.payload.get("seconds", 1.0)
    if earlier:
        seconds = ctx.payload.get("retry_seconds", seconds)
    return float(seconds)


def _ended(ctx: JobContext, how: str) -> None:
    with _recorder().begin() as conn:
        conn.execute(
            text(
                "UPDATE fence_test_executions SET ended_at = clock_timestamp(), how = :how "
                "WHERE job_id = :job_id AND pid = :pid AND ended_at IS NULL"
            ),
            {"job_id": ctx.job.id, "pid": os.getpid(), "how": how},
        )


def overlap(ctx: JobContext) -> Mapping[str, Any]:
    """Run ``seconds`` seconds unless cancelled; record the start and the end."""
    earlier = _started(ctx)
    how = "done"
    try:
        deadline = time.monotonic() + _seconds(ctx, earlier)
        while time.monotonic() < deadline:
            if ctx.cancelled:
                how = f"cancelled: {ctx.cancel_message}"
                ctx.raise_if_cancelled()
            time.sleep(0.02)
    finally:
        _ended(ctx, how)
    return {"pid": os.getpid()}


def quick(ctx: JobContext) -> Mapping[str, Any]:
    """Record one instant execution."""
    _started(ctx)
    _ended(ctx, "done")
    return {"pid": os.getpid()}


registry.register(JobType("overlap", overlap, description="Runs a while, recording its span."))
registry.register(JobType("quick", quick, description="Records one execution."))


def stuck(ctx: JobContext) -> None:
    """Ignore the timeout and the cancellation for ``seconds``."""
    _started(ctx)
    time.sleep(float(ctx.payload.get("seconds", 60)))
    _ended(ctx, "done")


registry.register(
    JobType("stuck", stuck, timeout_s=0.3, description="Overruns its timeout, deaf to it.")
)


def progressing(ctx: JobContext) -> Mapping[str, Any]:
    """Run ``seconds`` seconds writing its progress (forced: no throttle) every 20 ms, so a
    write is in flight whenever the link goes silent; record the start and the end."""
    earlier = _started(ctx)
    how = "done"
    try:
        deadline = time.monotonic() + _seconds(ctx, earlier)
        step = 0
        while time.monotonic() < deadline:
            step += 1
            ctx.report_progress(done=step, force=True)
            if ctx.cancelled:
                how = f"cancelled: {ctx.cancel_message}"
                ctx.raise_if_cancelled()
            time.sleep(0.02)
    finally:
        _ended(ctx, how)
    return {"pid": os.getpid()}


registry.register(
    JobType("progressing", progressing, description="Writes its progress in a tight loop.")
)
