"""Job types for the multi-process test of batches (decision 0041), loaded by real workers
through ``JOBS_EXTRA_REGISTRIES=tests.worker.waits_registry:registry``: ``member`` takes tens of
milliseconds (one in ten fails; a run cut by a kill is swept and runs again), ``gather`` reports
what ``ctx.awaited()`` reads when it runs; ``parent`` fans out members and waits for them."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry

registry = Registry("waits-test")


def member(ctx: JobContext) -> Mapping[str, Any]:
    time.sleep(random.uniform(0.02, 0.06))
    if ctx.payload.get("n", 0) % 10 == 3:
        raise ValueError("one in ten members fails")
    return {"ok": True}


def gather(ctx: JobContext) -> Mapping[str, Any]:
    summary = ctx.awaited()
    return {
        "total": len(summary.jobs),
        "ended": summary.ended,
        "counts": {status.value: n for status, n in summary.counts.items() if n},
    }


registry.register(JobType("member", member, max_attempts=3))
registry.register(JobType("gather", gather))


CHILDREN = 30
"""The children each ``parent`` fans out."""


def parent(ctx: JobContext) -> Mapping[str, Any]:
    """Fans out :data:`CHILDREN` members and waits for them without a slot (decision 0043); run
    again once they have all ended, reports what ``ctx.awaited()`` reads."""
    summary = ctx.awaited()
    if not summary.jobs:
        ctx.enqueue_many("member", [{"n": n} for n in range(CHILDREN)])
        ctx.wait_for_children()
    time.sleep(0.2)  # a resumed run long enough for a kill to cut some
    return {
        "total": len(summary.jobs),
        "ended": summary.ended,
        "counts": {status.value: n for status, n in summary.counts.items() if n},
    }


registry.register(JobType("parent", parent))
registry.register(JobType("quick", lambda ctx: None))
