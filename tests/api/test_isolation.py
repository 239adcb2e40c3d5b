"""Invariant 8: one org never sees, changes or learns the existence of another org's jobs.

Org A owns a job in every status; org B hits every route at each of them. B's answers must be
byte-identical to its answers for a job that does not exist, and A's jobs must not change.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Cancelled, Done, Failed, FakeClock, JobService

from tests.api.helpers import claim, finish

pytestmark = pytest.mark.anyio

ABSENT_ID = "01900000-0000-7000-8000-000000000000"


async def _org_a_jobs(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> dict[str, dict[str, Any]]:
    """A job of org A per status (and a protected one), as A sees them."""
    service: JobService = container.service()
    jobs = {}
    for status in ("done", "failed", "cancelled", "running", "protected", "queued"):
        type_ = "history" if status == "protected" else "exclusive"
        response = await client.post(
            "/jobs", json={"type": type_, "dedup_key": f"key-{status}"}, headers=as_a
        )
        assert response.status_code == 202
        job_id = response.json()["id"]
        clock.advance(1)
        if status in ("done", "protected"):
            finish(service, job_id, Done({"secret": "a's report"}))
        elif status == "failed":
            finish(service, job_id, Failed("a's error"))
        elif status == "cancelled":
            finish(service, job_id, Cancelled())
        elif status == "running":
            claim(service, job_id)
        jobs[status] = (await client.get(f"/jobs/{job_id}", headers=as_a)).json()
    return jobs


ACTIONS = [
    ("GET", "/jobs/{id}"),
    ("POST", "/jobs/{id}/cancel"),
    ("POST", "/jobs/{id}/retry"),
    ("DELETE", "/jobs/{id}"),
]


async def test_org_b_cannot_read_cancel_retry_or_delete_org_a_jobs(
    client: httpx.AsyncClient,
    as_a: dict[str, str],
    as_b: dict[str, str],
    container: Container,
    clock: FakeClock,
) -> None:
    a_jobs = await _org_a_jobs(client, as_a, container, clock)
    for method, template in ACTIONS:
        absent = await client.request(method, template.format(id=ABSENT_ID), headers=as_b)
        assert absent.status_code == 404
        for status, job in a_jobs.items():
            foreign = await client.request(method, template.format(id=job["id"]), headers=as_b)
            assert foreign.status_code == 404, (method, status)
            assert foreign.content == absent.content, (method, status)
            assert dict(foreign.headers) == dict(absent.headers), (method, status)
            assert job["id"] not in foreign.text

    for status, job in a_jobs.items():
        after = await client.get(f"/jobs/{job['id']}", headers=as_a)
        assert after.json() == job, status


async def test_org_b_lists_and_counts_none_of_org_a_jobs(
    client: httpx.AsyncClient,
    as_a: dict[str, str],
    as_b: dict[str, str],
    container: Container,
    clock: FakeClock,
) -> None:
    a_jobs = await _org_a_jobs(client, as_a, container, clock)
    b_job = (await client.post("/jobs", json={"type": "noop"}, headers=as_b)).json()

    for query in ("", "?status=active", "?status=finished", "?type=exclusive", "?limit=200"):
        page = (await client.get(f"/jobs{query}", headers=as_b)).json()
        listed = {item["id"] for item in page["items"]}
        assert listed <= {b_job["id"]}, query
        assert page["next_cursor"] is None

    # A cursor made from one of A's jobs pages through B's jobs only.
    a_page = (await client.get("/jobs?limit=1", headers=as_a)).json()
    assert a_page["next_cursor"] is not None
    b_page = (await client.get(f"/jobs?cursor={a_page['next_cursor']}", headers=as_b)).json()
    assert {item["id"] for item in b_page["items"]} <= {b_job["id"]}

    stats = (await client.get("/jobs/stats", headers=as_b)).json()
    assert stats == {
        "waiting": 0,
        "queued": 1,
        "running": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
        "active": 1,
    }
    a_stats = (await client.get("/jobs/stats", headers=as_a)).json()
    assert a_stats["done"] == 2
    assert len(a_jobs) == 6


async def test_dedup_keys_never_cross_orgs(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    body = {"type": "exclusive", "dedup_key": "crawl:site-1"}
    a_job = await client.post("/jobs", json=body, headers=as_a)
    b_job = await client.post("/jobs", json=body, headers=as_b)
    assert a_job.status_code == 202
    assert b_job.status_code == 202
    assert b_job.json()["id"] != a_job.json()["id"]
    # Each org deduplicates against its own job only.
    assert (await client.post("/jobs", json=body, headers=as_b)).json()["id"] == b_job.json()["id"]
    assert (await client.post("/jobs", json=body, headers=as_a)).json()["id"] == a_job.json()["id"]
