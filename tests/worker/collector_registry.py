"""A job type reporting the state of its worker process's garbage collector, loaded by real
workers through ``JOBS_EXTRA_REGISTRIES=tests.worker.collector_registry:registry``."""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry

registry = Registry("collector-tests")


def collector_state(ctx: JobContext) -> Mapping[str, Any]:
    """Whether the collector runs in this process, and how many objects it no longer walks."""
    return {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}


registry.register(
    JobType("collector_state", collector_state, description="Reports the collector's state.")
)
