"""The HTTP contract's actions and refusals, through httpx against the ASGI app, on the in-memory
store and on PostgreSQL: cancel, retry and delete with their 409s, every route's 401 alike, unknown
routes and methods as problems, the OpenAPI document (enqueue, read and list are in
``test_routes.py``)."""

from __future__ import annotations

import httpx
import pytest
from jobs_api.containers import Container
from jobs_core import Done, Failed, FakeClock

from tests.api.conftest import bearer
from tests.api.helpers import claim, finish
from tests.api.routes_kit import (
    ABSENT_ID,
    NOT_FOUND,
    assert_problem,
    enqueue,
    service_of,
)

pytestmark = pytest.mark.anyio


# ---- cancel, retry, delete --------------------------------------------------------------------


async def test_cancel_a_queued_job_at_once(client: httpx.AsyncClient, as_a: dict[str, str]) -> None:
    job = await enqueue(client, as_a)
    response = await client.post(f"/jobs/{job['id']}/cancel", headers=as_a)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["finished_at"] is not None


async def test_cancel_a_running_job_requests_it(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    job = await enqueue(client, as_a)
    claim(service_of(container), job["id"])
    response = await client.post(f"/jobs/{job['id']}/cancel", headers=as_a)
    assert response.status_code == 200
    assert response.json()["status"] == "running"
    assert response.json()["cancel_requested_at"] is not None


async def test_cancel_a_finished_job_is_a_409(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    job = await enqueue(client, as_a)
    finish(service_of(container), job["id"], Done())
    body = assert_problem(await client.post(f"/jobs/{job['id']}/cancel", headers=as_a), 409)
    assert body["type"] == "urn:jobs:problem:invalid-transition"
    assert body["detail"] == "cannot cancel a job that is done"


async def test_retry_a_failed_or_cancelled_job(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    failed = await enqueue(client, as_a)
    finish(service_of(container), failed["id"], Failed("boom"))
    cancelled = await enqueue(client, as_a)
    await client.post(f"/jobs/{cancelled['id']}/cancel", headers=as_a)
    for job in (failed, cancelled):
        response = await client.post(f"/jobs/{job['id']}/retry", headers=as_a)
        assert response.status_code == 200
        assert response.json()["status"] == "queued"
        assert response.json()["attempts"] == 0
        assert response.json()["error"] is None


async def test_retry_is_a_409_for_an_active_or_done_job(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    queued = await enqueue(client, as_a)
    body = assert_problem(await client.post(f"/jobs/{queued['id']}/retry", headers=as_a), 409)
    assert body["detail"] == "cannot retry a job that is queued"
    finish(service_of(container), queued["id"], Done())
    assert_problem(await client.post(f"/jobs/{queued['id']}/retry", headers=as_a), 409)


async def test_retry_is_a_409_when_another_job_holds_the_key(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    first = await enqueue(client, as_a, "exclusive", dedup_key="crawl:site-1")
    await client.post(f"/jobs/{first['id']}/cancel", headers=as_a)
    holder = await enqueue(client, as_a, "exclusive", dedup_key="crawl:site-1")
    body = assert_problem(await client.post(f"/jobs/{first['id']}/retry", headers=as_a), 409)
    assert body["type"] == "urn:jobs:problem:dedup-conflict"
    assert "crawl:site-1" in body["detail"]
    assert (await client.get(f"/jobs/{first['id']}", headers=as_a)).json()["status"] == (
        "cancelled"
    )
    assert (await client.get(f"/jobs/{holder['id']}", headers=as_a)).json()["status"] == "queued"


async def test_delete_a_finished_job(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    job = await enqueue(client, as_a)
    finish(service_of(container), job["id"], Done())
    response = await client.delete(f"/jobs/{job['id']}", headers=as_a)
    assert response.status_code == 204
    assert response.content == b""
    assert (await client.get(f"/jobs/{job['id']}", headers=as_a)).json() == NOT_FOUND
    assert_problem(await client.delete(f"/jobs/{job['id']}", headers=as_a), 404)


async def test_delete_an_active_job_is_a_409(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    running = await enqueue(client, as_a)
    claim(service_of(container), running["id"])
    queued = await enqueue(client, as_a)
    for job, status in ((queued, "queued"), (running, "running")):
        body = assert_problem(await client.delete(f"/jobs/{job['id']}", headers=as_a), 409)
        assert body["detail"] == f"cannot delete a job that is {status}"
    assert (await client.get("/jobs/stats", headers=as_a)).json()["active"] == 2


async def test_delete_a_protected_job_is_a_409_that_says_why(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    job = await enqueue(client, as_a, "history")
    finish(service_of(container), job["id"], Done())
    body = assert_problem(await client.delete(f"/jobs/{job['id']}", headers=as_a), 409)
    assert body["detail"] == "jobs of type 'history' are domain history and are never deleted"
    assert (await client.get(f"/jobs/{job['id']}", headers=as_a)).status_code == 200


# ---- authentication ---------------------------------------------------------------------------

AUTHED_ROUTES = [
    ("GET", "/jobs"),
    ("GET", "/jobs/stats"),
    ("POST", "/jobs"),
    ("GET", f"/jobs/{ABSENT_ID}"),
    ("POST", f"/jobs/{ABSENT_ID}/cancel"),
    ("POST", f"/jobs/{ABSENT_ID}/retry"),
    ("DELETE", f"/jobs/{ABSENT_ID}"),
]


@pytest.mark.parametrize(("method", "path"), AUTHED_ROUTES)
async def test_every_jobs_route_needs_a_valid_token_and_401s_alike(
    client: httpx.AsyncClient,
    container: Container,
    clock: FakeClock,
    method: str,
    path: str,
) -> None:
    from jobs_tokens import issue_token, revoke_token

    revoked, _ = issue_token(container.token_store(), "org-a", "old", clock.now())
    assert revoke_token(container.token_store(), revoked)
    unknown = "jobs_" + "A" * 43
    attempts: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": f"Basic {unknown}"},
        {"Authorization": unknown},
        bearer(unknown),
        bearer(revoked),
        bearer(revoked + "x"),
    ]
    bodies = set()
    for headers in attempts:
        response = await client.request(method, path, json={"type": "noop"}, headers=headers)
        assert_problem(response, 401)
        assert response.headers["www-authenticate"] == "Bearer"
        bodies.add(response.content)
    assert bodies == {
        b'{"type":"about:blank","title":"Unauthorized","status":401,'
        b'"detail":"a valid bearer token is required"}'
    }


async def test_the_bearer_scheme_is_case_insensitive(
    client: httpx.AsyncClient, token_a: str
) -> None:
    response = await client.get("/jobs", headers={"Authorization": f"bearer {token_a}"})
    assert response.status_code == 200


# ---- errors outside the routes ----------------------------------------------------------------


async def test_unknown_route_and_wrong_method_are_problems(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    missing = assert_problem(await client.get("/nowhere", headers=as_a), 404)
    assert missing["type"] == "about:blank"
    wrong = await client.put("/jobs", headers=as_a)
    assert_problem(wrong, 405)
    assert wrong.headers["allow"] == "GET, POST"


async def test_openapi_documents_every_route_with_models_and_problems(
    client: httpx.AsyncClient,
) -> None:
    schema = (await client.get("/openapi.json")).json()
    operations = {
        (method.upper(), path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    # /schedules and /settings are documented and checked in tests/api/test_schedules.py.
    assert {op for op in operations if not op[1].startswith(("/schedules", "/settings"))} == {
        ("GET", "/healthz"),
        ("POST", "/jobs"),
        ("GET", "/jobs"),
        ("GET", "/jobs/stats"),
        ("GET", "/jobs/{job_id}"),
        ("GET", "/jobs/{job_id}/awaited"),
        ("POST", "/batches"),
        ("POST", "/jobs/{job_id}/cancel"),
        ("POST", "/jobs/{job_id}/retry"),
        ("DELETE", "/jobs/{job_id}"),
        ("GET", "/job-types"),
        ("POST", "/job-types/{name}/pause"),
        ("POST", "/job-types/{name}/resume"),
        ("GET", "/jobs/events"),
        ("POST", "/session"),
        ("GET", "/session"),
        ("DELETE", "/session"),
        ("GET", "/quotas"),
        ("GET", "/overview"),
        ("GET", "/jobs/lookup"),
        ("POST", "/jobs/bulk"),
    }
    problem_ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
    for (method, path), operation in operations.items():
        responses = operation["responses"]
        success = [code for code in responses if code.startswith("2")]
        assert success, (method, path)
        errors = {code: r for code, r in responses.items() if code[0] in "45"}
        for code, response in errors.items():
            assert response["content"] == {"application/problem+json": problem_ref}, code
        if path == "/session":  # signs in with a token in the body, then the cookie
            continue
        if path != "/healthz":
            assert "401" in errors, (method, path)
            assert operation["security"] == [{"BearerToken": []}]
        if "{job_id}" in path:
            assert "404" in errors
        # (removing an org's quota override never conflicts: nothing to remove is a 204 too)
        if (method == "POST" and path.startswith("/jobs/{job_id}/")) or (
            method == "DELETE" and path != "/settings/quotas/{org_id}"
        ):
            assert "409" in errors
    enqueue_op = operations[("POST", "/jobs")]["responses"]
    assert enqueue_op["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobOut"
    }
    assert "Location" in enqueue_op["202"]["headers"]
    assert {"200", "413", "422"} <= enqueue_op.keys()
    body = operations[("POST", "/jobs")]["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["discriminator"]["mapping"]) == {
        "noop",
        "greet",
        "exclusive",
        "history",
        "crawl",
    }
    greet = schema["components"]["schemas"]["Enqueue_greet"]
    assert greet["required"] == ["type", "payload"]
    assert greet["properties"]["payload"]["required"] == ["name"]
    assert schema["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"
    assert set(schema["components"]["schemas"]["Problem"]["required"]) == {
        "type",
        "title",
        "status",
        "detail",
    }
