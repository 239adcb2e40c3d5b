"""Tracing, as a port (decision 0039): what the use cases and the worker tell a tracer, so that
a job's trace goes from the request that enqueued it to each attempt that ran it.

- An enqueue makes a PRODUCER span (``create {type}``; ``send {type}`` for a batch) around the
  insert, and each job carries that span's context (:attr:`jobs_core.domain.NewJob.
  trace_context`, a W3C carrier) into its row.
- A worker makes a CONSUMER span (``process {type}``) around each attempt, continuing the
  job's context; a failed attempt records its error. The children a handler enqueues
  (``ctx.enqueue``) each get a ``create`` span inside it.

The core imports nothing of OpenTelemetry: ``jobs_tracing.OtelTracer`` is the adapter (the
``opentelemetry-api`` package; whoever runs the process configures an SDK and an exporter).
:data:`NO_TRACER` is the default and costs nothing per job: its ``enabled`` is False, and the
callers test it once before doing anything for tracing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from jobs_core.domain import Job, NewJob, Outcome


class Producing(Protocol):
    """An open producer span: the specs stamped with its context, told the jobs created."""

    specs: Sequence[NewJob]
    """The specs given, each with the trace context of this enqueue."""

    def created(self, jobs: Sequence[Job | None]) -> None:
        """The jobs the insert created, in the specs' order (None: not created, e.g. a dedup
        key held by another job; the jobs of a batch that skipped some: only those created)."""
        ...


class Processing(Protocol):
    """An open consumer span around one attempt."""

    def ended(self, outcome: Outcome) -> Outcome:
        """Record ``outcome`` on the span (an error for a failure or a retryable error) and
        return it, its children (``Done.children``) stamped with a ``create`` span each."""
        ...


class Tracer(Protocol):
    """Makes the spans of enqueues and attempts."""

    enabled: bool
    """False: the callers skip tracing altogether (nothing is built per job)."""

    def producing(self, specs: Sequence[NewJob]) -> AbstractContextManager[Producing]:
        """A producer span around the insert of ``specs`` (one job: ``create``; several:
        ``send``), a child of the current context."""
        ...

    def processing(self, job: Job) -> AbstractContextManager[Processing]:
        """A consumer span around an attempt of ``job``, continuing its ``trace_context`` (a
        new trace when it has none)."""
        ...

    def continuing(self, carrier: Mapping[str, str]) -> AbstractContextManager[None]:
        """The remote context of ``carrier`` (an HTTP request's ``traceparent``...) as the
        current one for the block: the spans made inside it are its children."""
        ...


class _NoProducing:
    def __init__(self, specs: Sequence[NewJob]) -> None:
        self.specs = specs

    def created(self, jobs: Sequence[Job | None]) -> None:
        """Nothing to record."""


class _NoProcessing:
    def ended(self, outcome: Outcome) -> Outcome:
        return outcome


class NoTracer:
    """Tracing off: no span, no context (``enabled`` is False, so callers never call it on a
    hot path; its methods still work, doing nothing)."""

    enabled = False

    @contextmanager
    def producing(self, specs: Sequence[NewJob]) -> Iterator[Producing]:
        """No span."""
        yield _NoProducing(specs)

    @contextmanager
    def processing(self, job: Job) -> Iterator[Processing]:
        """No span."""
        yield _NoProcessing()

    @contextmanager
    def continuing(self, carrier: Mapping[str, str]) -> Iterator[None]:
        """No context."""
        yield


NO_TRACER: Tracer = NoTracer()
"""The tracer of a process that did not turn tracing on."""

_process_tracer: Tracer = NO_TRACER


def use_process_tracer(tracer: Tracer) -> None:
    """Make ``tracer`` the one every :class:`jobs_core.JobService` of this process uses unless
    given another: the deployables call it at start-up with ``JOBS_TRACING=1``, so the services
    a module builds for its own routes (or a transactional enqueue) trace their enqueues too.
    As OpenTelemetry's own provider, it is a process-wide setting."""
    global _process_tracer  # noqa: PLW0603 - one setting for the process, set at start-up
    _process_tracer = tracer


def process_tracer() -> Tracer:
    """The process's tracer (:data:`NO_TRACER` unless :func:`use_process_tracer` said)."""
    return _process_tracer
