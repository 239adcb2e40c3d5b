"""Every route and every status code of the HTTP contract, on the in-memory store and on
PostgreSQL, through httpx against the ASGI app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Cancelled, Done, Failed, FakeClock, JobType

from tests.api.helpers import BrokenSchema, claim, finish
from tests.api.routes_kit import (
    ABSENT_ID,
    JOB_FIELDS,
    NOT_FOUND,
    assert_problem,
    enqueue,
    service_of,
)

pytestmark = pytest.mark.anyio

# ---- health -----------------------------------------------------------------------------------


async def test_healthz_answers_ok_without_a_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


# ---- enqueue ----------------------------------------------------------------------------------


async def test_enqueue_answers_202_with_location_and_the_row_exists_at_once(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    response = await client.post("/jobs", json={"type": "noop", "payload": {"x": 1}}, headers=as_a)
    assert response.status_code == 202
    job = response.json()
    assert set(job) == JOB_FIELDS
    assert job["status"] == "queued"
    assert job["attempts"] == 0
    assert job["payload"] == {"x": 1}  # what the panel shows a job's target from
    assert response.headers["location"] == f"/jobs/{job['id']}"

    polled = await client.get(response.headers["location"], headers=as_a)
    assert polled.status_code == 200
    # read alone, a queued job also says why it waits (no worker runs in this test)
    # and its attempts so far (none): both only on a job read alone
    waiting = polled.json().pop("waiting")
    alone = {"waiting": None, "attempt_history": None}
    assert {**polled.json(), **alone} == {**job, **alone}
    assert job["waiting"] is None
    assert job["attempt_history"] is None
    assert polled.json()["attempt_history"] == []
    assert waiting == [
        {"code": "no_worker", "message": "no live worker serves type 'noop'; start one"}
    ]


async def test_enqueue_with_a_held_key_answers_200_with_the_existing_job(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    first = await enqueue(client, as_a, "noop", dedup_key="reconcile:42")
    again = await client.post(
        "/jobs", json={"type": "noop", "dedup_key": "reconcile:42"}, headers=as_a
    )
    assert again.status_code == 200
    assert "location" not in again.headers
    assert again.json()["id"] == first["id"]
    assert again.json()["dedup_key"] == "reconcile:42"


async def test_enqueue_validates_the_payload_with_the_type_schema(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    ok = await enqueue(client, as_a, "greet", payload={"name": "Ada"})
    assert (await client.get(f"/jobs/{ok['id']}", headers=as_a)).json()["type"] == "greet"

    response = await client.post(
        "/jobs", json={"type": "greet", "payload": {"times": 0, "extra": 1}}, headers=as_a
    )
    body = assert_problem(response, 422)
    assert body["type"] == "urn:jobs:problem:payload-invalid"
    locs = {tuple(error["loc"]) for error in body["errors"]}
    assert locs == {
        ("body", "payload", "name"),
        ("body", "payload", "times"),
        ("body", "payload", "extra"),
    }
    assert all(error["msg"] for error in body["errors"])


async def test_unknown_and_non_public_types_are_refused_alike(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    unknown = assert_problem(await client.post("/jobs", json={"type": "nope"}, headers=as_a), 422)
    internal = assert_problem(
        await client.post("/jobs", json={"type": "internal"}, headers=as_a), 422
    )
    assert unknown == {
        "type": "urn:jobs:problem:unknown-job-type",
        "title": "Unprocessable Entity",
        "status": 422,
        "detail": "unknown job type 'nope'",
        "errors": [
            {"loc": ["body", "type"], "msg": "unknown job type 'nope'", "type": "unknown_job_type"}
        ],
    }
    assert internal == {
        key: value.replace("nope", "internal") if isinstance(value, str) else value
        for key, value in unknown.items()
        if key != "errors"
    } | {
        "errors": [
            {
                "loc": ["body", "type"],
                "msg": "unknown job type 'internal'",
                "type": "unknown_job_type",
            }
        ]
    }
    assert (await client.get("/jobs/stats", headers=as_a)).json()["queued"] == 0


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({}, ["body", "type"]),
        ({"type": ""}, ["body", "type"]),
        ({"type": "noop", "payload": [1]}, ["body", "payload"]),
        ({"type": "noop", "dedup_key": ""}, ["body", "dedup_key"]),
        ({"type": "noop", "priority": 101}, ["body", "priority"]),
    ],
)
async def test_a_malformed_enqueue_body_is_a_422_naming_the_field(
    client: httpx.AsyncClient, as_a: dict[str, str], body: dict[str, Any], loc: list[str]
) -> None:
    problem = assert_problem(await client.post("/jobs", json=body, headers=as_a), 422)
    assert problem["type"] == "urn:jobs:problem:invalid-request"
    assert [error["loc"] for error in problem["errors"]] == [loc]


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        (b'{"type": "noop", "payload": {"s": "a\\u0000b"}}', ["body", "payload", "s"]),
        (b'{"type": "noop", "payload": {"n": [NaN]}}', ["body", "payload", "n", 0]),
        (b'{"type": "greet", "payload": {"name": "\\u0000"}}', ["body", "payload", "name"]),
    ],
)
async def test_a_payload_no_store_can_hold_is_a_422_on_every_adapter(
    client: httpx.AsyncClient, as_a: dict[str, str], raw: bytes, loc: list[Any]
) -> None:
    response = await client.post(
        "/jobs", content=raw, headers={**as_a, "Content-Type": "application/json"}
    )
    body = assert_problem(response, 422)
    assert body["type"] == "urn:jobs:problem:payload-invalid"
    assert [error["loc"] for error in body["errors"]] == [loc]


async def test_nul_in_a_key_or_filter_is_a_422(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    body = {"type": "noop", "dedup_key": "k\x00"}
    problem = assert_problem(await client.post("/jobs", json=body, headers=as_a), 422)
    assert problem["errors"][0]["loc"] == ["body", "dedup_key"]
    listed = await client.get("/jobs", params={"type": "a\x00"}, headers=as_a)
    assert assert_problem(listed, 422)["errors"][0]["loc"] == ["query", "type"]


async def test_invalid_json_is_a_422(client: httpx.AsyncClient, as_a: dict[str, str]) -> None:
    response = await client.post(
        "/jobs", content=b'{"type": ', headers={**as_a, "Content-Type": "application/json"}
    )
    assert_problem(response, 422)


async def test_a_body_over_the_limit_is_a_413_declared_or_streamed(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    limit = int(container.config.max_body_bytes())
    padding = "x" * limit
    declared = await client.post(
        "/jobs", json={"type": "noop", "payload": {"pad": padding}}, headers=as_a
    )
    body = assert_problem(declared, 413)
    assert str(limit) in body["detail"]

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"type": "noop", "payload": {"pad": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536
        yield b'"}}'

    streamed = await client.post(
        "/jobs", content=chunks(), headers={**as_a, "Content-Type": "application/json"}
    )
    assert "content-length" not in streamed.request.headers
    assert assert_problem(streamed, 413) == body
    assert (await client.get("/jobs/stats", headers=as_a)).json()["queued"] == 0


async def test_a_body_under_the_limit_passes(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    job = await enqueue(client, as_a, "noop", payload={"pad": "x" * 500_000})
    assert job["status"] == "queued"


async def test_an_unexpected_error_is_a_500_problem_that_leaks_nothing(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    # A module's schema with a bug: not a jobs error, so nothing maps it but the 500 handler.
    container.registry().register(
        JobType("broken", lambda ctx: None, public=True, payload_schema=BrokenSchema())
    )
    response = await client.post("/jobs", json={"type": "broken"}, headers=as_a)
    body = assert_problem(response, 500)
    assert body["detail"] == "an unexpected error occurred"
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text


# ---- read -------------------------------------------------------------------------------------


async def test_get_job_shows_the_parent_of_a_child(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    parent = await enqueue(client, as_a, "noop", payload={"fan": "out"})
    service = service_of(container)
    running = claim(service, parent["id"])
    child = service.registry.new_job(running.org_id, "noop", {"page": 1})
    service.complete(running.ref, Done(children=(child,)))
    listed = (await client.get("/jobs", headers=as_a)).json()["items"]
    [made] = [job for job in listed if job["id"] != parent["id"]]
    seen = (await client.get(f"/jobs/{made['id']}", headers=as_a)).json()
    assert seen["parent_id"] == parent["id"]
    assert seen["payload"] == {"page": 1}
    assert (await client.get(f"/jobs/{parent['id']}", headers=as_a)).json()["parent_id"] is None


async def test_get_job_shows_the_whole_life_of_a_job(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> None:
    job = await enqueue(client, as_a, "noop", payload={"k": "v"}, dedup_key="k1")
    clock.advance(5)
    running = claim(service_of(container), job["id"])
    service_of(container).store.save_progress(running.ref, {"done": 1, "total": 2}, clock.now())
    seen = (await client.get(f"/jobs/{job['id']}", headers=as_a)).json()
    assert seen["status"] == "running"
    assert seen["attempts"] == 1
    assert seen["progress"]["done"] == 1
    assert seen["started_at"] is not None
    assert "lease" not in seen
    assert "org_id" not in seen

    clock.advance(5)
    service_of(container).complete(running.ref, Done({"rows": 3}))
    done = (await client.get(f"/jobs/{job['id']}", headers=as_a)).json()
    assert set(done) == JOB_FIELDS
    assert done["status"] == "done"
    assert done["report"] == {"rows": 3}
    assert done["finished_at"] is not None
    assert done["dedup_key"] == "k1"


async def test_absent_and_malformed_ids_share_one_404_body(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    absent = await client.get(f"/jobs/{ABSENT_ID}", headers=as_a)
    malformed = await client.get("/jobs/not-a-uuid", headers=as_a)
    assert assert_problem(absent, 404) == NOT_FOUND
    assert malformed.content == absent.content
    assert malformed.headers["content-type"] == absent.headers["content-type"]


# ---- list and stats ---------------------------------------------------------------------------


async def _jobs_in_every_status(
    client: httpx.AsyncClient, headers: dict[str, str], container: Container, clock: FakeClock
) -> dict[str, str]:
    """One job per status for the org of ``headers``; their ids by status."""
    service = service_of(container)
    ids = {}
    for status in ("done", "failed", "cancelled", "running", "queued"):
        ids[status] = (await enqueue(client, headers, "noop"))["id"]
        clock.advance(1)
        if status == "done":
            finish(service, ids[status], Done())
        elif status == "failed":
            finish(service, ids[status], Failed("it broke"))
        elif status == "cancelled":
            finish(service, ids[status], Cancelled())
        elif status == "running":
            claim(service, ids[status])
    return ids


async def test_list_is_newest_first_and_filters_by_status_group_and_type(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> None:
    ids = await _jobs_in_every_status(client, as_a, container, clock)
    greet = (await enqueue(client, as_a, "greet", payload={"name": "x"}))["id"]

    async def listed(query: str) -> list[str]:
        response = await client.get(f"/jobs{query}", headers=as_a)
        assert response.status_code == 200, response.text
        assert response.json()["next_cursor"] is None
        return [item["id"] for item in response.json()["items"]]

    everything = [greet, ids["queued"], ids["running"], ids["cancelled"], ids["failed"]]
    assert await listed("") == [*everything, ids["done"]]
    for status in ("queued", "running", "done", "failed", "cancelled"):
        expected = [ids[status]] if status != "queued" else [greet, ids["queued"]]
        assert await listed(f"?status={status}") == expected
    assert await listed("?status=active") == [greet, ids["queued"], ids["running"]]
    assert await listed("?status=finished") == [ids["cancelled"], ids["failed"], ids["done"]]
    assert await listed("?type=greet") == [greet]
    assert await listed("?type=greet&status=finished") == []


async def test_list_pages_with_an_opaque_cursor(
    client: httpx.AsyncClient, as_a: dict[str, str], clock: FakeClock
) -> None:
    created = []
    for i in range(7):
        created.append((await enqueue(client, as_a, "noop", payload={"i": i}))["id"])
        if i % 2:  # several jobs share a created_at: the id breaks the tie
            clock.advance(1)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = (await client.get(f"/jobs{query}", headers=as_a)).json()
        pages += 1
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(created))


async def test_list_limit_is_bounded_and_a_bad_cursor_is_a_422(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    for query in ("?limit=0", "?limit=201", "?limit=x", "?status=zombie"):
        assert_problem(await client.get(f"/jobs{query}", headers=as_a), 422)
    assert (await client.get("/jobs?limit=200", headers=as_a)).status_code == 200
    for cursor in ("abc", "%%%", "MjAyNi0wMS0wMXxub3QtYS11dWlk", "bm90aGluZw"):
        body = assert_problem(await client.get(f"/jobs?cursor={cursor}", headers=as_a), 422)
        assert body["errors"][0]["loc"] == ["query", "cursor"]


async def test_stats_count_each_status_and_the_active_total(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> None:
    await _jobs_in_every_status(client, as_a, container, clock)
    await enqueue(client, as_a, "noop")
    response = await client.get("/jobs/stats", headers=as_a)
    assert response.status_code == 200
    assert response.json() == {
        "waiting": 0,
        "queued": 2,
        "running": 1,
        "done": 1,
        "failed": 1,
        "cancelled": 1,
        "active": 3,
    }
