"""Flow control over HTTP: type-owned dedup keys (422 for another key), priority, and why a
queued job waits — without a word about hosts or pids (docs/flow-control.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import JobService

from tests.api.helpers import claim

pytestmark = pytest.mark.anyio


def _service(container: Container) -> JobService:
    service: JobService = container.service()
    return service


async def _post(client: httpx.AsyncClient, headers: dict[str, str], **body: Any) -> httpx.Response:
    return await client.post("/jobs", json=body, headers=headers)


async def test_a_type_owned_key_is_derived_and_another_is_refused(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    first = await _post(client, as_a, type="crawl", payload={"site_id": 42})
    assert first.status_code == 202
    assert first.json()["dedup_key"] == "crawl:42"
    again = await _post(client, as_a, type="crawl", payload={"site_id": 42})
    same = await _post(client, as_a, type="crawl", payload={"site_id": 42}, dedup_key="crawl:42")
    assert again.status_code == 200
    assert same.status_code == 200
    assert again.json()["id"] == same.json()["id"] == first.json()["id"]

    other = await _post(client, as_a, type="crawl", payload={"site_id": 42}, dedup_key="mine")
    assert other.status_code == 422
    problem = other.json()
    assert problem["errors"][0]["loc"] == ["body", "dedup_key"]
    assert "crawl:42" in problem["detail"] + str(problem["errors"])
    missing = await _post(client, as_a, type="crawl", payload={})
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["loc"] == ["body", "payload", "site_id"]


async def test_priority_is_taken_shown_and_bounded(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    low = await _post(client, as_a, type="noop", payload={"n": 1})
    high = await _post(client, as_a, type="noop", payload={"n": 2}, priority=100)
    assert (low.json()["priority"], high.json()["priority"]) == (0, 100)
    first = _service(container).claim(1)
    assert [str(j.id) for j in first] == [high.json()["id"]]
    for bad in (101, -101, "high", 1.5):
        refused = await _post(client, as_a, type="noop", priority=bad)
        assert refused.status_code == 422, bad


async def test_get_says_why_a_queued_job_waits(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    running = (await _post(client, as_a, type="crawl", payload={"site_id": 7})).json()
    claim(_service(container), running["id"])
    # another crawl of site 7 cannot be enqueued (the key is held by the active one) ...
    held = await _post(client, as_a, type="crawl", payload={"site_id": 7})
    assert held.json()["id"] == running["id"]
    # ... and one of site 8 waits only for a worker
    waiting = (await _post(client, as_a, type="crawl", payload={"site_id": 8})).json()
    body = (await client.get(f"/jobs/{waiting['id']}", headers=as_a)).json()
    assert [w["code"] for w in body["waiting"]] == ["no_worker"]
    assert body["waiting"][0]["message"] == "no live worker serves type 'crawl'; start one"
    assert "pid" not in str(body)
    assert "host" not in str(body)
    shown = (await client.get(f"/jobs/{running['id']}", headers=as_a)).json()
    assert shown["status"] == "running"
    assert shown["waiting"] is None


async def test_get_says_when_a_rate_limited_job_starts_next(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    service = _service(container)
    first = service.enqueue("org-a", "polite", {"site_id": 3}).job
    started = claim(service, str(first.id))
    held = service.enqueue("org-a", "polite", {"site_id": 3}).job
    body = (await client.get(f"/jobs/{held.id}", headers=as_a)).json()
    (limited,) = [w for w in body["waiting"] if w["code"] == "rate_limited"]
    assert started.started_at is not None
    next_at = started.started_at + timedelta(hours=1)
    assert limited["message"].startswith(
        f"rate limited: next start at {next_at.isoformat(timespec='milliseconds')}"
    )
    assert "site_id=3" in limited["message"]
