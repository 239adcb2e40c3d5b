"""A module's route that enqueues through a service of its own (as the imports module's routes
do) continues the request's trace when the API runs with ``JOBS_TRACING=1``: the deployable
makes its tracer the process's (``jobs_core.tracing.use_process_tracer``)."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations as written.

from typing import Annotated, Any

import httpx
import pytest
from dependency_injector import providers
from fastapi import APIRouter, Depends
from jobs_api.app import create_app
from jobs_api.containers import build_container
from jobs_api.settings import ApiSettings
from jobs_core import InMemoryJobStore, JobService
from jobs_core.modules import Module, RouteContext
from jobs_core.tracing import NO_TRACER, use_process_tracer
from jobs_tokens import issue_token
from jobs_tracing import OtelTracer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.tracing.helpers import CALLER_SPAN, ORG, TRACE_ID, TRACEPARENT, named, registry

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _module_routers(ctx: RouteContext) -> list[APIRouter]:
    """A module's route that enqueues through a service of its own (as the imports module's
    routes do), not the API's."""
    router = APIRouter()
    store = InMemoryJobStore()

    @router.post("/reports")
    def start_report(org: Annotated[str, Depends(ctx.current_org)]) -> dict[str, Any]:
        job = JobService(store, registry()).enqueue(org, "ok").job
        return {"id": str(job.id), "trace_context": job.trace_context}

    return [router]


async def test_a_module_route_s_enqueue_continues_the_request_s_trace() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    container = build_container(ApiSettings(store="memory", tracing=True), [registry()])
    container.tracer.override(providers.Object(OtelTracer(provider)))
    container.modules.override(providers.Object((Module("reports", routers=_module_routers),)))
    try:
        token, _ = issue_token(container.token_store(), ORG, "tests", container.clock().now())
        transport = httpx.ASGITransport(app=create_app(container))
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
            answer = await http.post(
                "/reports",
                headers={"Authorization": f"Bearer {token}", "traceparent": TRACEPARENT},
            )
        assert answer.status_code == 200, answer.text
        [create] = named(exporter, "create ok")
        assert create.parent is not None
        assert format(create.parent.span_id, "016x") == CALLER_SPAN
        assert answer.json()["trace_context"]["traceparent"].startswith(f"00-{TRACE_ID}-")
    finally:
        use_process_tracer(NO_TRACER)
        container.reset_override()
    assert JobService(InMemoryJobStore(), registry()).tracer is NO_TRACER
