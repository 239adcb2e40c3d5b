"""What the tracing tests share: the org, a caller's W3C ``traceparent``, the job types (one
that succeeds, one that fails, one that enqueues a child) and the finished spans by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ORG = "org-t"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


class Boom(Exception):
    """What the failing handler raises."""


def registry() -> Registry:
    made = Registry("tracing-tests")

    def ok(ctx: JobContext) -> Mapping[str, Any]:
        return {"ok": True}

    def boom(ctx: JobContext) -> None:
        raise Boom("the handler broke")

    def parent(ctx: JobContext) -> None:
        ctx.enqueue("ok", {"child": 1})

    made.register(JobType("ok", ok, public=True))
    made.register(JobType("boom", boom, public=True))
    made.register(JobType("parent", parent, public=True))
    return made


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]
