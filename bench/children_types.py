"""The benchmark's in-process no-op type, in a module that imports only ``jobs_core``: the
isolated child of ``bench.children`` rebuilds it from ``bench.children_types:registry`` and so
pays what a real module's isolated child pays, not the benchmark's own imports."""

from __future__ import annotations

from typing import Any

from jobs_core import JobContext, Registry

registry = Registry("bench-children")


@registry.job_type("bench_inproc_noop")
def noop(_ctx: JobContext) -> dict[str, Any]:
    """Does nothing."""
    return {}
