"""Job types for the isolation tests, loaded by real workers through
``JOBS_EXTRA_REGISTRIES=tests.subprocess.crash_registry:registry`` and run in a child process
by ``JOBS_ISOLATED_TYPES``."""

from __future__ import annotations

import os
import signal
from typing import Any

from jobs_core import JobContext, JobType, Registry, RetryPolicy, constant

registry = Registry("isolation-tests")


def segfault(ctx: JobContext) -> None:
    """Dies the way a native crash does: SIGSEGV, no Python exception."""
    ctx.report_progress(1, 2, force=True, stage="about to crash")
    os.kill(os.getpid(), signal.SIGSEGV)


def pid(ctx: JobContext) -> dict[str, Any]:
    """Reports the process it ran in."""
    return {"pid": os.getpid()}


def resumable(ctx: JobContext) -> dict[str, Any]:
    """First attempt: a checkpoint, then a retryable error; the next one resumes from it."""
    if ctx.checkpoint is None or "row" not in ctx.checkpoint:
        ctx.report_progress(5, 10, force=True, row=5)
        raise ConnectionError("flaky network (retryable)")
    return {"resumed_from_row": ctx.checkpoint["row"], "attempt": ctx.attempt, "pid": os.getpid()}


def patient(ctx: JobContext) -> dict[str, Any]:
    """Reports progress until cancelled (cooperatively, through the child's SIGTERM)."""
    step = 0
    while not ctx.wait_cancelled(0.1):
        step += 1
        ctx.report_progress(step, 1000, force=True)
    ctx.raise_if_cancelled()
    return {"steps": step}


registry.register(JobType("iso_segv", segfault, max_attempts=1))
registry.register(JobType("iso_pid", pid))
registry.register(
    JobType(
        "iso_resume",
        resumable,
        max_attempts=3,
        retry=RetryPolicy(retry_on=(ConnectionError,), backoff=constant(0)),
    )
)
registry.register(JobType("iso_patient", patient))
