"""OpenTelemetry tracing (issue 24, decision 0039), with the SDK's in-memory exporter: an HTTP
request that enqueues carries its trace into the job (a PRODUCER span ``create {type}``, a
child of the request's ``traceparent``), the worker's CONSUMER span ``process {type}`` continues
it (its parent, and a link), a failure is recorded, the children a handler enqueues get their
own ``create`` spans, a bulk enqueue one ``send`` span whose context every job of the batch
carries (COPY paths included); with tracing off no job carries a context. On both stores."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from dependency_injector import providers
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import (
    FakeClock,
    InMemoryJobStore,
    JobFilter,
    JobService,
    Status,
)
from jobs_tokens import issue_token
from jobs_tracing import OtelTracer
from jobs_worker.worker import Worker
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.tracing.helpers import CALLER_SPAN, ORG, TRACE_ID, TRACEPARENT, named, registry
from tests.worker.helpers import FAST, running, wait_until

pytestmark = pytest.mark.anyio

ADAPTERS = ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]


class _Polling:
    """A wake-up that never sleeps long: the worker polls its store (both stores alike)."""

    def wait(self, timeout: float) -> bool:
        time.sleep(min(timeout, 0.01))
        return True

    def close(self) -> None:
        """Nothing to release."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(exporter))
    return made


def _container(
    request: pytest.FixtureRequest, tracer: OtelTracer | None, **settings: Any
) -> Iterator[Container]:
    store = request.param
    built = build_container(ApiSettings(store=store, **settings), [registry()])
    if store == "postgres":
        built.engine.override(providers.Object(request.getfixturevalue("pg_engine")))
    built.clock.override(providers.Object(FakeClock()))
    if tracer is not None:
        built.tracer.override(providers.Object(tracer))
    yield built
    built.reset_override()


@pytest.fixture(params=ADAPTERS)
def container(request: pytest.FixtureRequest, provider: TracerProvider) -> Iterator[Container]:
    """The API's container with tracing on (the test's SDK provider), on each adapter."""
    yield from _container(request, OtelTracer(provider))


@pytest.fixture(params=ADAPTERS)
def untraced(request: pytest.FixtureRequest) -> Iterator[Container]:
    """The API's container as configured by default: tracing off."""
    yield from _container(request, None)


async def _post(container: Container, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    token, _ = issue_token(container.token_store(), ORG, "tests", container.clock().now())
    transport = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        answer = await http.post(
            "/jobs", json=body, headers={"Authorization": f"Bearer {token}", **headers}
        )
    assert answer.status_code == 202, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _drain(service: JobService, count: int) -> None:
    """Run a worker in this process until ``count`` jobs have ended."""
    worker = Worker(service, _Polling(), FAST)
    ended = (Status.DONE, Status.FAILED)
    with running(worker):
        wait_until(
            lambda: len([j for j in service.list_all_orgs(EVERY) if j.status in ended]) >= count,
            what=f"{count} jobs to end",
        )


EVERY = JobFilter(limit=10_000)


async def test_a_request_s_trace_goes_through_the_enqueue_to_the_worker_s_attempt(
    container: Container, exporter: InMemorySpanExporter
) -> None:
    job = await _post(container, {"type": "ok"}, traceparent=TRACEPARENT)
    [create] = named(exporter, "create ok")
    assert create.kind is SpanKind.PRODUCER
    assert create.parent is not None
    assert format(create.context.trace_id, "032x") == TRACE_ID
    assert format(create.parent.span_id, "016x") == CALLER_SPAN
    assert dict(create.attributes or {}) == {
        "messaging.system": "jobs",
        "messaging.operation.type": "create",
        "messaging.operation.name": "create",
        "messaging.destination.name": "ok",
        "messaging.message.id": job["id"],
    }
    service = container.service()
    stored = service.get_any_org(uuid.UUID(job["id"]))
    assert stored.trace_context is not None
    assert stored.trace_context["traceparent"] == (
        f"00-{TRACE_ID}-{format(create.context.span_id, '016x')}-01"
    )

    _drain(service, 1)
    [process] = named(exporter, "process ok")
    assert process.kind is SpanKind.CONSUMER
    assert process.parent is not None
    assert process.parent.span_id == create.context.span_id
    assert process.context.trace_id == create.context.trace_id
    assert [link.context.span_id for link in process.links] == [create.context.span_id]
    attributes = dict(process.attributes or {})
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.destination.name"] == "ok"
    assert attributes["messaging.message.id"] == job["id"]
    assert attributes["jobs.attempt"] == 1
    assert attributes["jobs.outcome"] == "done"
    assert "jobs.org_id" not in attributes  # only with JOBS_TRACING_ORG=1
    assert process.status.status_code is StatusCode.UNSET


async def test_a_failed_attempt_is_an_error_with_its_exception(
    container: Container, exporter: InMemorySpanExporter
) -> None:
    await _post(container, {"type": "boom"})
    _drain(container.service(), 1)
    [process] = named(exporter, "process boom")
    assert process.status.status_code is StatusCode.ERROR
    assert "the handler broke" in (process.status.description or "")
    [event] = [e for e in process.events if e.name == "exception"]
    attributes = dict(event.attributes or {})
    assert attributes["exception.type"] == "Boom"
    assert "the handler broke" in str(attributes["exception.message"])
    assert "raise Boom" in str(attributes["exception.stacktrace"])
    [create] = named(exporter, "create boom")
    assert create.parent is None  # no traceparent: the enqueue starts the trace
    assert process.parent is not None
    assert process.parent.span_id == create.context.span_id


async def test_a_child_gets_its_own_create_span_inside_its_parent_s_attempt(
    container: Container, exporter: InMemorySpanExporter
) -> None:
    await _post(container, {"type": "parent"})
    _drain(container.service(), 2)
    [parent] = named(exporter, "process parent")
    [create_child] = [s for s in named(exporter, "create ok") if s.parent is not None]
    assert create_child.parent is not None
    assert create_child.parent.span_id == parent.context.span_id
    [child] = named(exporter, "process ok")
    assert child.parent is not None
    assert child.parent.span_id == create_child.context.span_id
    assert child.context.trace_id == parent.context.trace_id


@pytest.mark.parametrize("size", [3, 150, 2_001])
def test_a_bulk_enqueue_is_one_send_span_every_job_carries(
    container: Container, exporter: InMemorySpanExporter, size: int
) -> None:
    # 3: array parameters; 150 without keys: COPY into jobs; 2,001 with keys: COPY then INSERT
    keys = [f"k{i}" for i in range(size)] if size > 2_000 else None
    service = container.service()
    jobs = service.enqueue_many(ORG, "ok", [{"i": i} for i in range(size)], dedup_keys=keys)
    [send] = named(exporter, "send ok")
    assert send.kind is SpanKind.PRODUCER
    attributes = dict(send.attributes or {})
    assert attributes["messaging.batch.message_count"] == size
    assert attributes["jobs.created"] == size
    expected = f"00-{format(send.context.trace_id, '032x')}-{format(send.context.span_id, '016x')}"
    for job in (jobs[0], jobs[-1]):
        stored = service.get(ORG, job.id)
        assert (stored.trace_context or {}).get("traceparent", "").startswith(expected)


def test_the_org_is_an_attribute_only_when_asked(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    service = JobService(InMemoryJobStore(), registry(), tracer=OtelTracer(provider, org=True))
    service.enqueue(ORG, "ok")
    [create] = named(exporter, "create ok")
    assert dict(create.attributes or {})["jobs.org_id"] == ORG


async def test_with_tracing_off_no_job_carries_a_context(untraced: Container) -> None:
    job = await _post(untraced, {"type": "ok"}, traceparent=TRACEPARENT)
    service = untraced.service()
    assert service.tracer.enabled is False
    assert service.get(ORG, uuid.UUID(job["id"])).trace_context is None
    many = service.enqueue_many(ORG, "ok", [{}] * 150)
    assert service.get(ORG, many[-1].id).trace_context is None
