"""Job types with rate limits for the multi-process rate limit test, loaded by real workers
through ``JOBS_EXTRA_REGISTRIES=tests.worker.rate_registry:registry``. The starts the test
checks are the claims' (``job_attempts.started_at``, what the rate counts); the handler also
records when it ran, for the failure message."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry

RATE = (3, 1.0)
"""3 starts per key per second."""

registry = Registry("rate-tests")


def fetch(ctx: JobContext) -> Mapping[str, Any]:
    """Work a little, as a polite fetch would (10 ms)."""
    time.sleep(0.01)
    return {"pid": os.getpid(), "ran_at": time.time()}


def plain(ctx: JobContext) -> Mapping[str, Any]:
    return {"pid": os.getpid()}


registry.register(JobType("rated_fetch", fetch, concurrency_key="site", rate_limit=RATE))
registry.register(
    JobType("rated_both", fetch, concurrency_key="site", concurrency_limit=1, rate_limit=RATE)
)
registry.register(JobType("unrated", plain))
