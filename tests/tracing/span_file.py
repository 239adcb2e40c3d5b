"""Imported by a worker process under test (``JOBS_EXTRA_REGISTRIES=tests.tracing.span_file:
registry``): configures the process's OpenTelemetry SDK to write every finished span, one JSON
line each, to the file ``JOBS_TEST_SPAN_FILE`` names, as a deployment's SDK would export them.
Its registry declares no type (the demo types are the worker's)."""

from __future__ import annotations

import os

from jobs_core import Registry
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

_out = open(os.environ["JOBS_TEST_SPAN_FILE"], "a", buffering=1)  # noqa: SIM115 - the process's
_provider = TracerProvider()
_provider.add_span_processor(
    SimpleSpanProcessor(
        ConsoleSpanExporter(out=_out, formatter=lambda span: span.to_json(indent=None) + "\n")
    )
)
trace.set_tracer_provider(_provider)

registry = Registry("span-file")
