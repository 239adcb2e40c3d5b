"""Jobs that wait for others over HTTP (decision 0041): ``depends_on`` on ``POST /jobs``,
``POST /batches`` and ``GET /jobs/{id}/awaited``, on both stores. An org can neither wait for
nor read another org's jobs: their ids are answered as absent ones."""

from __future__ import annotations

import uuid

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Done, Failed

from tests.api.helpers import finish
from tests.api.routes_kit import enqueue, service_of

pytestmark = pytest.mark.anyio


async def test_a_dependent_waits_says_why_and_runs_after_its_dependency(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    service = service_of(container)
    first = await enqueue(client, as_a, "noop")
    answer = await client.post(
        "/jobs", json={"type": "noop", "depends_on": [first["id"]]}, headers=as_a
    )
    assert answer.status_code == 202, answer.text
    after = answer.json()
    assert after["status"] == "waiting"
    read = (await client.get(f"/jobs/{after['id']}", headers=as_a)).json()
    assert read["waiting"] == [
        {
            "code": "awaiting",
            "message": "waits for other jobs to end (its dependencies or its batch's members)",
        }
    ]
    awaited = (await client.get(f"/jobs/{after['id']}/awaited", headers=as_a)).json()
    assert awaited == {
        "jobs": [{"id": first["id"], "type": "noop", "status": "queued"}],
        "total": 1,
        "ended": 0,
        "counts": {s: int(s == "queued") for s in awaited["counts"]},
    }
    stats = (await client.get("/jobs/stats", headers=as_a)).json()
    assert (stats["waiting"], stats["queued"], stats["active"]) == (1, 1, 2)
    listed = (await client.get("/jobs?status=waiting", headers=as_a)).json()["items"]
    assert [job["id"] for job in listed] == [after["id"]]

    finish(service, first["id"], Done({}))
    service.release_waiting()
    assert (await client.get(f"/jobs/{after['id']}", headers=as_a)).json()["status"] == "queued"


async def test_a_failed_dependency_cancels_and_says_which(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    service = service_of(container)
    first = await enqueue(client, as_a, "noop")
    after = (
        await client.post("/jobs", json={"type": "noop", "depends_on": [first["id"]]}, headers=as_a)
    ).json()
    finish(service, first["id"], Failed("boom"))
    service.release_waiting()
    ended = (await client.get(f"/jobs/{after['id']}", headers=as_a)).json()
    assert ended["status"] == "cancelled"
    assert ended["error"] == f"a job it depends on ended failed: {first['id']}"


async def test_another_orgs_jobs_cannot_be_awaited_nor_read(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    theirs = await enqueue(client, as_b, "noop")
    absent = str(uuid.uuid4())
    answer = await client.post(
        "/jobs", json={"type": "noop", "depends_on": [theirs["id"], absent]}, headers=as_a
    )
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["type"] == "urn:jobs:problem:dependency-invalid"
    [error] = problem["errors"]
    assert error["loc"] == ["body", "depends_on"]
    assert set(problem["missing"]) == {theirs["id"], absent}
    assert (await client.get("/jobs/stats", headers=as_a)).json()["active"] == 0
    mine = (
        await client.post(
            "/jobs", json={"type": "noop", "depends_on": [theirs["id"]]}, headers=as_b
        )
    ).json()
    not_found = await client.get(f"/jobs/{mine['id']}/awaited", headers=as_a)
    assert not_found.status_code == 404


@pytest.mark.parametrize(
    ("depends_on", "message"),
    [([], "at least 1"), (["not-a-uuid"], "UUID"), ([str(uuid.UUID(int=1))] * 2, "twice")],
)
async def test_a_bad_depends_on_is_a_422_saying_what_to_fix(
    client: httpx.AsyncClient, as_a: dict[str, str], depends_on: list[str], message: str
) -> None:
    answer = await client.post(
        "/jobs", json={"type": "noop", "depends_on": depends_on}, headers=as_a
    )
    assert answer.status_code == 422
    assert message in answer.text


async def test_a_batch_and_its_callback_with_its_progress(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    service = service_of(container)
    body = {
        "jobs": [{"type": "noop"}, {"type": "greet", "payload": {"name": "Ada"}}],
        "callback": {"type": "noop", "payload": {}},
    }
    answer = await client.post("/batches", json=body, headers=as_a)
    assert answer.status_code == 201, answer.text
    batch = answer.json()
    assert batch["callback"]["status"] == "waiting"
    assert len(batch["members"]) == 2
    claimed = {str(job.id): job for job in service.claim(10)}
    first, second = (claimed[member] for member in batch["members"])
    service.complete(first.ref, Done({}))
    service.release_waiting()
    progress = (await client.get(f"/jobs/{batch['callback']['id']}/awaited", headers=as_a)).json()
    assert (progress["ended"], progress["total"], progress["counts"]["done"]) == (1, 2, 1)
    service.complete(second.ref, Failed("boom"))
    service.release_waiting()
    callback = (await client.get(f"/jobs/{batch['callback']['id']}", headers=as_a)).json()
    assert callback["status"] == "queued"  # a callback runs whatever its members' ends


async def test_a_batch_with_a_bad_member_writes_nothing(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    body = {
        "jobs": [{"type": "noop"}, {"type": "greet", "payload": {"name": 3}}],
        "callback": {"type": "noop"},
    }
    answer = await client.post("/batches", json=body, headers=as_a)
    assert answer.status_code == 422
    internal = {"jobs": [{"type": "internal"}], "callback": {"type": "noop"}}
    assert (await client.post("/batches", json=internal, headers=as_a)).status_code == 422
    assert (await client.get("/jobs/stats", headers=as_a)).json()["active"] == 0
