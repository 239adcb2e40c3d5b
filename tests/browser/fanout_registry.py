"""Job types of the panel's children test (decision 0045), loaded by the real API and worker
through ``JOBS_EXTRA_REGISTRIES=tests.browser.fanout_registry:registry``: ``fanout`` enqueues
``children`` ``kid`` jobs (``ctx.enqueue_many``) and waits for them without a slot
(``ctx.wait_for_children``), then reports what ``ctx.awaited()`` reads; a ``kid`` sleeps
``seconds`` and fails when its ``n`` ends in 7 (a batch's ends are not all ``done``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry

registry = Registry("fanout-test")


def fanout(ctx: JobContext) -> Mapping[str, Any]:
    summary = ctx.awaited()
    if not summary.jobs:
        count = int(ctx.payload.get("children", 3))
        seconds = float(ctx.payload.get("seconds", 0.1))
        ctx.enqueue_many("kid", [{"n": n, "seconds": seconds} for n in range(count)])
        ctx.wait_for_children(report={"children": count})
    return {
        "children": len(summary.jobs),
        "counts": {status.value: n for status, n in summary.counts.items() if n},
    }


def kid(ctx: JobContext) -> Mapping[str, Any]:
    n = int(ctx.payload.get("n", 0))
    time.sleep(float(ctx.payload.get("seconds", 0.1)))
    if n % 10 == 7:
        raise ValueError(f"child {n} fails, as one in ten does")
    return {"n": n}


registry.register(JobType("fanout", fanout, public=True))
registry.register(JobType("kid", kid, public=True, max_attempts=1))
