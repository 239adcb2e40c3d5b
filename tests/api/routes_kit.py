"""What the route tests share: the fields of a job as the API shows it, the 404 body, an
enqueue over HTTP, a problem document's checks."""

from __future__ import annotations

from typing import Any

import httpx
from jobs_api.containers import Container
from jobs_core import JobService

JOB_FIELDS = {
    "id",
    "type",
    "payload",
    "status",
    "progress",
    "report",
    "error",
    "created_at",
    "started_at",
    "finished_at",
    "attempts",
    "max_attempts",
    "run_at",
    "dedup_key",
    "cancel_requested_at",
    "priority",
    "snoozes",
    "parent_id",
    "children",
    "waiting",
    "attempt_history",
    "truncated",
}
NOT_FOUND = {
    "type": "urn:jobs:problem:job-not-found",
    "title": "Not Found",
    "status": 404,
    "detail": "no such job",
}
ABSENT_ID = "01900000-0000-7000-8000-000000000000"


def service_of(container: Container) -> JobService:
    """The app's own service (the same store the routes use)."""
    service: JobService = container.service()
    return service


async def enqueue(
    client: httpx.AsyncClient, headers: dict[str, str], type_: str = "noop", **body: Any
) -> dict[str, Any]:
    """POST /jobs that must create a job; its representation."""
    response = await client.post("/jobs", json={"type": type_, **body}, headers=headers)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is a problem document of ``status``; its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    return body
