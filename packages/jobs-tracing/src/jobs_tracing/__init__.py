"""OpenTelemetry tracing of jobs (decision 0039, docs/operations.md "Traces"): the adapter of
:class:`jobs_core.tracing.Tracer` on the OpenTelemetry API.

Spans follow the messaging semantic conventions: an enqueue is a PRODUCER span ``create
{type}`` (a bulk enqueue: ``send {type}``, one span for the batch), an attempt a CONSUMER span
``process {type}`` whose parent is the job's creation context, also given as a link (the
conventions' way to relate a message's processing to its creation); attributes
``messaging.system`` (``jobs``), ``messaging.operation.type`` / ``.name``,
``messaging.destination.name`` (the job type), ``messaging.message.id`` (the job id),
``messaging.batch.message_count``, and ``jobs.attempt``, ``jobs.outcome``; ``jobs.org_id``
only when asked (``org=True``, ``JOBS_TRACING_ORG=1``: an org id may be personal data). The
context travels in the job's row as a W3C trace context (``traceparent``, ``tracestate``).

Only ``opentelemetry-api`` is needed: without an SDK configured (``opentelemetry-instrument``,
or the process's own ``TracerProvider``), every span is a no-op.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from jobs_core.domain import Done, Failed, Job, NewJob, Outcome, Requeue
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

SYSTEM = "jobs"
"""``messaging.system``: no well-known value fits a job queue on PostgreSQL."""

_W3C = TraceContextTextMapPropagator()


def _base(operation: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
    }


def _error_event(span: Span, error: str, report: Mapping[str, Any] | None) -> None:
    """The failure as the conventions' ``exception`` event (the handler's exception is gone:
    the runner turned it into the outcome's error and report)."""
    attributes = {"exception.message": error}
    report = report or {}
    if isinstance(report.get("exception_type"), str):
        attributes["exception.type"] = report["exception_type"]
    if isinstance(report.get("traceback"), str):
        attributes["exception.stacktrace"] = report["traceback"]
    span.add_event("exception", attributes)
    span.set_status(Status(StatusCode.ERROR, error))


class _Producing:
    def __init__(self, span: Span, specs: Sequence[NewJob], org: bool) -> None:
        self._span = span
        self.specs = specs
        self._org = org

    def created(self, jobs: Sequence[Job | None]) -> None:
        made = [job for job in jobs if job is not None]
        if len(self.specs) == 1:
            if made:
                self._span.set_attribute("messaging.message.id", str(made[0].id))
            else:
                self._span.set_attribute("jobs.deduplicated", True)
        else:
            self._span.set_attribute("jobs.created", len(made))


class _Processing:
    def __init__(self, tracer: OtelTracer, span: Span) -> None:
        self._tracer = tracer
        self._span = span

    def ended(self, outcome: Outcome) -> Outcome:
        span = self._span
        if span.is_recording():  # not sampled: nothing to record
            span.set_attribute("jobs.outcome", type(outcome).__name__.lower())
            if isinstance(outcome, Failed):
                _error_event(span, outcome.error, outcome.report)
            elif isinstance(outcome, Requeue) and outcome.error is not None and not outcome.snooze:
                _error_event(span, outcome.error, outcome.report)  # retried later: an error
        if isinstance(outcome, Done) and outcome.children:
            # Stamped even when not sampled: the children carry the trace's context on.
            stamped = tuple(self._tracer.created_now(child) for child in outcome.children)
            return dataclasses.replace(outcome, children=stamped)
        return outcome


class OtelTracer:
    """:class:`jobs_core.tracing.Tracer` on OpenTelemetry; ``tracer_provider`` None: the
    global one (what ``opentelemetry-instrument`` or the process configured)."""

    enabled = True

    def __init__(self, tracer_provider: trace.TracerProvider | None = None, *, org: bool = False):
        self._tracer = trace.get_tracer("jobs", tracer_provider=tracer_provider)
        self._org = org

    def _carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)  # the current span's context
        return carrier

    @contextmanager
    def producing(self, specs: Sequence[NewJob]) -> Iterator[_Producing]:
        """A PRODUCER span around an insert; each spec carries its context."""
        types = sorted({spec.type for spec in specs})
        operation = "create" if len(specs) == 1 else "send"
        attributes = _base(operation)
        if len(types) == 1:
            attributes["messaging.destination.name"] = types[0]
        if len(specs) != 1:
            attributes["messaging.batch.message_count"] = len(specs)
        orgs = {spec.org_id for spec in specs}
        if self._org and len(orgs) == 1:
            attributes["jobs.org_id"] = next(iter(orgs))
        name = f"{operation} {types[0]}" if len(types) == 1 else operation
        with self._tracer.start_as_current_span(
            name, kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            carrier = self._carrier()
            stamped = [dataclasses.replace(spec, trace_context=carrier) for spec in specs]
            yield _Producing(span, stamped, self._org)

    def created_now(self, spec: NewJob) -> NewJob:
        """``spec`` with the context of a ``create`` span made now, in the current context (a
        child a handler enqueued, written with its parent's outcome)."""
        attributes = _base("create")
        attributes["messaging.destination.name"] = spec.type
        if self._org:
            attributes["jobs.org_id"] = spec.org_id
        with self._tracer.start_as_current_span(
            f"create {spec.type}", kind=SpanKind.PRODUCER, attributes=attributes
        ):
            return dataclasses.replace(spec, trace_context=self._carrier())

    @contextmanager
    def processing(self, job: Job) -> Iterator[_Processing]:
        """A CONSUMER span around an attempt of ``job``: a child of its creation context, with
        a link to it (a new trace for a job enqueued with tracing off).

        The worker's cost per attempt, so written for it: the span is started and made current
        by hand (one context manager, not three), and its attributes are set only when the
        sampler records it (an attempt whose trace is not sampled builds none of them). A
        sampler therefore sees the span's name and kind, not its attributes."""
        parent = _W3C.extract(dict(job.trace_context)) if job.trace_context else None
        links: list[Link] = []
        if parent is not None:
            created = trace.get_current_span(parent).get_span_context()
            if created.is_valid:
                links.append(Link(created))
        span = self._tracer.start_span(
            f"process {job.type}", context=parent, kind=SpanKind.CONSUMER, links=links
        )
        if span.is_recording():
            attributes = _base("process")
            attributes["messaging.destination.name"] = job.type
            attributes["messaging.message.id"] = str(job.id)
            attributes["jobs.attempt"] = job.attempts
            if self._org:
                attributes["jobs.org_id"] = job.org_id
            span.set_attributes(attributes)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            yield _Processing(self, span)
        except BaseException as error:  # the runner catches the handler's: only the worker's own
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            raise
        finally:
            otel_context.detach(token)
            span.end()

    @contextmanager
    def continuing(self, carrier: Mapping[str, str]) -> Iterator[None]:
        """The remote context of ``carrier`` (W3C headers) current for the block."""
        token = otel_context.attach(_W3C.extract(dict(carrier)))
        try:
            yield
        finally:
            otel_context.detach(token)


__all__ = ["SYSTEM", "OtelTracer"]
