"""A real worker process with ``JOBS_TRACING=1`` (issue 24): its OpenTelemetry SDK (configured
by the process, here through ``tests.tracing.span_file``) exports a ``process noop`` span whose
parent is the ``create noop`` span this test's enqueue made, in the same trace; without
``JOBS_TRACING`` the same worker exports none."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_tracing import OtelTracer
from jobs_worker.demo import registry as demo_registry
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="jobs-tracing-test-") as path:
        yield Path(path)


def _spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("tracing", ["1", "0"])
def test_a_worker_process_continues_the_trace_of_the_enqueue(
    pg_url: str, pg_engine: Engine, workdir: Path, tracing: str
) -> None:
    from jobs_postgres.store import PostgresJobStore

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    service = JobService(
        PostgresJobStore(pg_engine), demo_registry, SystemClock(), tracer=OtelTracer(provider)
    )
    span_file = workdir / "spans.jsonl"
    worker = WorkerProcess(
        pg_url,
        workdir / "worker.log",
        {
            "JOBS_TRACING": tracing,
            "JOBS_TEST_SPAN_FILE": str(span_file),
            "JOBS_EXTRA_REGISTRIES": "tests.tracing.span_file:registry",
        },
    )
    try:
        worker.wait_started()
        job = service.enqueue(ORG, "noop").job
        wait_until(lambda: job_of(service.store, job.id).status is Status.DONE, 30, "the job")
        [create] = [s for s in exporter.get_finished_spans() if s.name == "create noop"]
        if tracing == "0":
            assert _spans(span_file) == []
            return
        wait_until(lambda: _spans(span_file), 10, "the worker's span")
        [process] = _spans(span_file)
        assert process["name"] == "process noop"
        assert process["kind"] == "SpanKind.CONSUMER"
        assert process["context"]["trace_id"] == f"0x{create.context.trace_id:032x}"
        assert process["parent_id"] == f"0x{create.context.span_id:016x}"
        assert process["attributes"]["messaging.message.id"] == str(job.id)
        assert process["attributes"]["jobs.outcome"] == "done"
    finally:
        worker.close()
    assert "Traceback" not in worker.log(), worker.log()
