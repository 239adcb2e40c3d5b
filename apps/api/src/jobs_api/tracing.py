"""Tracing in the API (decision 0039, docs/operations.md "Traces"): with ``JOBS_TRACING=1`` the
service makes a producer span per enqueue, and :class:`ContinueTrace` makes the W3C trace
context of the request (``traceparent``, ``tracestate``) the current one while the request is
served, so the producer span of a job it enqueues is a child of the caller's span.

Nothing else: the API makes no span of its own for a request (an OpenTelemetry ASGI
instrumentation, if the deployment adds one, makes it; the enqueue's span is then its child).
"""

from __future__ import annotations

from jobs_core.tracing import NO_TRACER, Tracer
from starlette.types import ASGIApp, Receive, Scope, Send

_HEADERS = (b"traceparent", b"tracestate")


def api_tracer(enabled: bool, org: bool) -> Tracer:
    """OpenTelemetry's tracer with ``JOBS_TRACING=1`` (``jobs_tracing`` imported then only)."""
    if not enabled:
        return NO_TRACER
    from jobs_tracing import OtelTracer

    return OtelTracer(org=org)


class ContinueTrace:
    """ASGI middleware: the request's trace context current while it is served (added only
    when tracing is on)."""

    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        self.app = app
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _HEADERS
        }
        if not carrier:
            await self.app(scope, receive, send)
            return
        with self.tracer.continuing(carrier):
            await self.app(scope, receive, send)
