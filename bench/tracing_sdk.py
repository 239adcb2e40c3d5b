"""Tracing on in a benchmark worker, for the ``on`` side of an A/B (a benchmark instrument only).

``JOBS_TRACING=1`` alone makes the worker call OpenTelemetry's API, but with no SDK configured
every span is a no-op, which would measure too little. A benchmark worker started with
``JOBS_BENCH_TRACING_SDK=1`` as well configures the SDK as a deployment would (a
``TracerProvider`` with a ``BatchSpanProcessor``) with an exporter that drops what it is given:
the spans are made, filled, queued and exported, only nothing is sent over a network. The
drain's jobs are enqueued by the harness without a context, so each attempt starts a trace::

    uv run python -m bench.flow ab --b /path/to/main-worktree \\
        --variant tracing:JOBS_TRACING=1,JOBS_BENCH_TRACING_SDK=1
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

SDK_ENV = "JOBS_BENCH_TRACING_SDK"


def install_if_asked() -> bool:
    """Configure the SDK with a dropping exporter if ``JOBS_BENCH_TRACING_SDK=1``; True then."""
    if os.environ.get(SDK_ENV, "").strip() not in {"1", "true", "yes", "on"}:
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)
    return True
