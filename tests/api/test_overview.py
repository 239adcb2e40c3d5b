"""The Overview's routes over HTTP (in process), on the in-memory store and on PostgreSQL:
``GET /overview``, ``GET /jobs/lookup``, ``POST /jobs/bulk``; an org never sees, finds or touches
another org's jobs (its ids are answered exactly as absent ones)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from dependency_injector import providers
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import Done, Failed, FakeClock, JobService, Outcome
from jobs_core.workers import WorkerInfo
from jobs_tokens import issue_token

from tests.api.conftest import ADAPTERS, bearer
from tests.api.helpers import finish, make_registry
from tests.api.routes_kit import NOT_FOUND, assert_problem, enqueue, service_of

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ADAPTERS)
def container(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[Container]:
    """The app's container with an operator org and room for 5 queued jobs an org, on each
    adapter."""
    settings = ApiSettings(store=request.param, operator_orgs="ops", quota_max_queued=5)
    built = build_container(settings, [make_registry()])
    if request.param == "postgres":
        built.engine.override(providers.Object(request.getfixturevalue("pg_engine")))
    built.clock.override(providers.Object(clock))
    yield built
    built.reset_override()


def _finish_all(service: JobService, outcomes: dict[str, Outcome]) -> None:
    """Claim every queued job, as a worker would, and end each with its outcome."""
    claimed = {str(job.id): job for job in service.claim(1000)}
    assert set(outcomes) == set(claimed)
    for job_id, outcome in outcomes.items():
        service.complete(claimed[job_id].ref, outcome)


@pytest.fixture
def as_ops(container: Container, clock: FakeClock) -> dict[str, str]:
    token, _ = issue_token(container.token_store(), "ops", "tests", clock.now())
    return bearer(token)


async def test_the_overview_counts_per_type_and_charts_what_finished(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str], container: Container
) -> None:
    service = service_of(container)
    done = await enqueue(client, as_a)
    failed = await enqueue(client, as_a, "greet", payload={"name": "x"})
    _finish_all(service, {done["id"]: Done(), failed["id"]: Failed(error="no")})
    await enqueue(client, as_a)
    await enqueue(client, as_b)  # another org's: never in A's view
    response = await client.get("/overview", headers=as_a)
    assert response.status_code == 200, response.text
    view = response.json()
    assert view["window"] == "hour"
    assert view["bucket_s"] == 60.0
    types = {t["type"]: t for t in view["types"]}
    assert set(types) == {"noop", "greet"}
    assert types["noop"]["counts"] == {
        "waiting": 0,
        "queued": 1,
        "running": 0,
        "done": 1,
        "failed": 0,
        "cancelled": 0,
    }
    assert types["noop"]["total"] == 2
    assert len(types["noop"]["series"]) == 60
    assert sum(b["done"] for b in types["noop"]["series"]) == 1
    assert sum(b["failed"] for b in types["greet"]["series"]) == 1
    assert view["workers"] is None  # a tenant never sees the workers
    assert view["usage"]["usage"]["queued_jobs"] == 1
    filtered = (await client.get("/overview?status=queued&window=day", headers=as_a)).json()
    assert [(t["type"], t["total"]) for t in filtered["types"]] == [("greet", 0), ("noop", 1)]
    assert len(filtered["types"][0]["series"]) == 48
    one = (await client.get("/overview?type=greet", headers=as_a)).json()
    assert [t["type"] for t in one["types"]] == ["greet"]


async def test_an_operator_sees_the_live_workers_with_their_slots_and_types(
    client: httpx.AsyncClient, as_ops: dict[str, str], container: Container, clock: FakeClock
) -> None:
    now = clock.now()
    worker = WorkerInfo(uuid.uuid4(), "host-1", 42, ("noop", "greet"), 8, now, now)
    container.store().register_worker(worker)
    view = (await client.get("/overview", headers=as_ops)).json()
    assert view["workers"] == [
        {
            "host": "host-1",
            "pid": 42,
            "slots": 8,
            "types": ["noop", "greet"],
            "started_at": now.isoformat().replace("+00:00", "Z"),
            "last_seen_at": now.isoformat().replace("+00:00", "Z"),
        }
    ]


async def test_bad_overview_parameters_are_422(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    for query in ("window=week", "status=lost", "windw=hour"):
        assert_problem(await client.get(f"/overview?{query}", headers=as_a), 422)


async def test_a_lookup_finds_a_job_by_id_short_id_or_prefix(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    job = await enqueue(client, as_a)
    hex_id = uuid.UUID(job["id"]).hex
    for text in (job["id"], hex_id[-8:], hex_id[:24], job["id"].upper()):
        response = await client.get("/jobs/lookup", params={"id": text}, headers=as_a)
        assert response.status_code == 200, (text, response.text)
        assert response.json()["id"] == job["id"]
    # Another org's job is not found, with the body of an absent one.
    for text in (job["id"], hex_id[-8:]):
        response = await client.get("/jobs/lookup", params={"id": text}, headers=as_b)
        assert response.status_code == 404
        assert response.json() == NOT_FOUND
    for bad in ("", "zzzzzzzz", "abc", hex_id + "00"):
        body = assert_problem(
            await client.get("/jobs/lookup", params={"id": bad}, headers=as_a), 422
        )
        assert body["errors"][0]["loc"] == ["query", "id"]


async def test_an_ambiguous_lookup_lists_the_candidates(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    jobs = [await enqueue(client, as_a) for _ in range(3)]
    # UUIDv7s made within a minute share their first 8 digits (their creation time).
    prefix = uuid.UUID(jobs[0]["id"]).hex[:8]
    assert all(uuid.UUID(j["id"]).hex.startswith(prefix) for j in jobs)
    body = assert_problem(
        await client.get("/jobs/lookup", params={"id": prefix}, headers=as_a), 409
    )
    assert body["type"] == "urn:jobs:problem:ambiguous-id"
    assert {c["id"] for c in body["candidates"]} == {j["id"] for j in jobs}
    assert body["more"] is False


async def test_bulk_retry_by_ids_skips_another_orgs_ids_as_absent_ones(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str], container: Container
) -> None:
    service = service_of(container)
    mine = [await enqueue(client, as_a) for _ in range(2)]
    theirs = await enqueue(client, as_b)
    _finish_all(service, {job["id"]: Failed(error="no") for job in (*mine, theirs)})
    absent = str(uuid.uuid4())
    ids = [mine[0]["id"], mine[1]["id"], theirs["id"], absent]
    dry = await client.post(
        "/jobs/bulk", json={"action": "retry", "ids": ids, "dry_run": True}, headers=as_a
    )
    assert dry.status_code == 200, dry.text
    assert dry.json()["done"] == {"retried": 2}
    assert (await client.get(f"/jobs/{mine[0]['id']}", headers=as_a)).json()["status"] == "failed"
    report = (
        await client.post("/jobs/bulk", json={"action": "retry", "ids": ids}, headers=as_a)
    ).json()
    assert report["done"] == {"retried": 2}
    assert report["acted"] == 2
    skipped = {s["id"]: s for s in report["skipped"]}
    assert set(skipped) == {theirs["id"], absent}
    assert skipped[theirs["id"]]["reason"] == skipped[absent]["reason"] == "not_found"
    assert skipped[theirs["id"]]["detail"] == skipped[absent]["detail"]
    assert (await client.get(f"/jobs/{theirs['id']}", headers=as_b)).json()["status"] == "failed"
    for job in mine:
        assert (await client.get(f"/jobs/{job['id']}", headers=as_a)).json()["status"] == "queued"


async def test_bulk_retries_are_admitted_under_the_orgs_quota(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> None:
    failed = [await enqueue(client, as_a) for _ in range(5)]
    _finish_all(service_of(container), {job["id"]: Failed(error="no") for job in failed})
    clock.advance(container.config.quota_refresh_s())  # the API counts its queued jobs again
    for _ in range(3):
        await enqueue(client, as_a)  # 3 of the org's 5 queued jobs
    body = {"action": "retry", "status": "failed"}
    dry = (await client.post("/jobs/bulk", json={**body, "dry_run": True}, headers=as_a)).json()
    assert dry["done"] == {"retried": 5}  # a dry run counts what the rules allow, not quotas
    report = (await client.post("/jobs/bulk", json=body, headers=as_a)).json()
    assert report["done"] == {"retried": 2}
    reasons = [s["reason"] for s in report["skipped"]]
    assert reasons == ["quota_exceeded"] * 3
    assert "quota of queued jobs is 5" in report["skipped"][0]["detail"]
    stats = (await client.get("/jobs/stats", headers=as_a)).json()
    assert (stats["queued"], stats["failed"]) == (5, 3)


async def test_bulk_on_the_filter_acts_on_at_most_limit_jobs(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    for _ in range(3):
        await enqueue(client, as_a)
    await enqueue(client, as_b)
    body = {"action": "cancel", "status": "queued", "type": "noop", "limit": 2}
    dry = (await client.post("/jobs/bulk", json={**body, "dry_run": True}, headers=as_a)).json()
    assert (dry["matched"], dry["more"], dry["done"]) == (2, True, {"cancelled": 2})
    report = (await client.post("/jobs/bulk", json=body, headers=as_a)).json()
    assert report["done"] == {"cancelled": 2}
    stats = (await client.get("/jobs/stats", headers=as_a)).json()
    assert (stats["queued"], stats["cancelled"]) == (1, 2)
    assert (await client.get("/jobs/stats", headers=as_b)).json()["queued"] == 1
    deleted = (
        await client.post(
            "/jobs/bulk", json={"action": "delete", "status": "cancelled"}, headers=as_a
        )
    ).json()
    assert deleted["done"] == {"deleted": 2}


async def test_bad_bulk_requests_are_422_with_what_to_do(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    cases = [
        {"action": "retry", "ids": []},
        {"action": "retry", "ids": ["not-a-uuid"]},
        {"action": "retry", "ids": [str(uuid.uuid4())] * 1001},
        {"action": "retry", "ids": [str(uuid.uuid4())], "status": "failed"},
        {"action": "explode", "status": "failed"},
        {"action": "retry", "limit": 1001},
        {"action": "retry", "limit": 0},
    ]
    for body in cases:
        problem = assert_problem(await client.post("/jobs/bulk", json=body, headers=as_a), 422)
        assert problem["errors"], body


async def test_the_windows_follow_the_clock(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container, clock: FakeClock
) -> None:
    job = await enqueue(client, as_a)
    finish(service_of(container), job["id"], Done())
    clock.advance(timedelta(hours=2).total_seconds())
    hour = (await client.get("/overview", headers=as_a)).json()
    assert [t["series"] for t in hour["types"]] == [[]]  # counted, nothing finished this hour
    day = (await client.get("/overview?window=day", headers=as_a)).json()
    assert sum(b["done"] for b in day["types"][0]["series"]) == 1
