"""``GET /jobs/{id}`` shows every ended attempt (``attempt_history``, issue 24), on the
in-memory store and on PostgreSQL, through httpx against the ASGI app; the OpenAPI document
describes it."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Done, FakeClock, Requeue

from tests.api.helpers import claim
from tests.api.routes_kit import enqueue, service_of

pytestmark = pytest.mark.anyio

TRACEBACK = 'Traceback (most recent call last):\n  File "myjobs/x.py", line 3\nValueError: boom'


async def test_get_job_lists_each_attempt_with_its_traceback(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> None:
    service = service_of(container)
    job = await enqueue(client, as_a, "noop")
    fresh = (await client.get(f"/jobs/{job['id']}", headers=as_a)).json()
    assert fresh["attempt_history"] == []

    first = claim(service, job["id"])
    clock.advance(2)
    retry_at = clock.now() + timedelta(seconds=1)
    report = {"traceback": TRACEBACK}
    service.complete(first.ref, Requeue(run_at=retry_at, error="ValueError: boom", report=report))
    clock.advance(1)
    second = claim(service, job["id"])
    clock.advance(0.5)
    service.complete(second.ref, Done({"rows": 1}))

    seen = (await client.get(f"/jobs/{job['id']}", headers=as_a)).json()
    assert seen["attempts"] == 2
    history = seen["attempt_history"]
    assert [(a["attempt"], a["outcome"]) for a in history] == [(1, "retrying"), (2, "done")]
    assert history[0]["error"] == "ValueError: boom"
    assert history[0]["traceback"] == TRACEBACK
    assert history[0]["duration_s"] == 2.0
    assert history[1]["traceback"] is None
    assert history[1]["duration_s"] == 0.5

    listed = (await client.get("/jobs", headers=as_a)).json()["items"]
    assert [item["attempt_history"] for item in listed] == [None]


async def test_the_openapi_document_describes_the_attempts(client: httpx.AsyncClient) -> None:
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    attempt = schemas["AttemptOut"]
    assert set(attempt["properties"]) == {
        "attempt",
        "started_at",
        "ended_at",
        "duration_s",
        "worker",
        "outcome",
        "error",
        "traceback",
    }
    assert "attempt_history" in schemas["JobOut"]["properties"]
    assert set(schemas["AttemptOutcome"]["enum"]) >= {"retrying", "lost", "handed_back"}
