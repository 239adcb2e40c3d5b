"""Pause and resume a job type over HTTP (issue 24): operators only (a tenant's token is refused
403 before the name is looked at, whatever it names), 404 for a name that is not a type, the
pause shown by ``GET /job-types`` to everyone and its jobs left queued (the reason a job waits
says so), a resume making them claimable again."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from dependency_injector import providers
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock
from jobs_tokens import issue_token

from tests.api.conftest import ADAPTERS, bearer
from tests.api.helpers import make_registry

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ADAPTERS)
def container(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[Container]:
    """The app's container with the operator org ``ops``, on each adapter."""
    store = request.param
    built = build_container(
        ApiSettings(store=store, operator_orgs="ops"),
        [make_registry()],
    )
    if store == "postgres":
        built.engine.override(providers.Object(request.getfixturevalue("pg_engine")))
    built.clock.override(providers.Object(clock))
    yield built
    built.reset_override()


@pytest.fixture
def as_ops(container: Container, clock: FakeClock) -> dict[str, str]:
    """Headers acting for the operator org."""
    token, _ = issue_token(container.token_store(), "ops", "tests", clock.now())
    return bearer(token)


async def test_a_tenant_can_neither_pause_nor_resume_nor_probe_names(
    client: httpx.AsyncClient, as_a: dict[str, str], container: Container
) -> None:
    for name in ("noop", "internal", "no_such_type", "drop table jobs", "x" * 300):
        for action in ("pause", "resume"):
            answer = await client.post(f"/job-types/{name}/{action}", headers=as_a)
            assert answer.status_code == 403, (name, action, answer.text)
            problem = answer.json()
            assert problem["type"] == "urn:jobs:problem:forbidden"
            assert "JOBS_OPERATOR_ORGS" in problem["detail"]
            assert name not in problem["detail"]
    assert container.service().paused_types() == {}
    listed = (await client.get("/job-types", headers=as_a)).json()
    assert listed["can_pause"] is False
    assert listed["paused"] == []


async def test_no_token_is_401(client: httpx.AsyncClient) -> None:
    assert (await client.post("/job-types/noop/pause")).status_code == 401


async def test_an_unknown_type_is_404_for_an_operator(
    client: httpx.AsyncClient, as_ops: dict[str, str]
) -> None:
    for action in ("pause", "resume"):
        answer = await client.post(f"/job-types/no_such_type/{action}", headers=as_ops)
        assert answer.status_code == 404, answer.text
        assert "no_such_type" in answer.json()["detail"]


async def test_an_operator_pauses_a_type_everyone_sees_it_and_its_jobs_wait(
    client: httpx.AsyncClient,
    as_ops: dict[str, str],
    as_a: dict[str, str],
    container: Container,
    clock: FakeClock,
) -> None:
    queued = (await client.post("/jobs", json={"type": "noop"}, headers=as_a)).json()
    paused = await client.post("/job-types/noop/pause", headers=as_ops)
    assert paused.status_code == 200, paused.text
    body = paused.json()
    assert (body["name"], body["paused"], body["paused_by"]) == ("noop", True, "api:ops")
    clock.advance(3)
    again = (await client.post("/job-types/noop/pause", headers=as_ops)).json()
    assert again["paused_at"] == body["paused_at"]  # the first pause stays

    listed = (await client.get("/job-types", headers=as_a)).json()
    noop = next(t for t in listed["items"] if t["name"] == "noop")
    assert noop["paused_at"] == body["paused_at"]
    assert noop["paused_by"] == "api:ops"
    assert all(t["paused_at"] is None for t in listed["items"] if t["name"] != "noop")
    assert [p["name"] for p in listed["paused"]] == ["noop"]
    assert (await client.get("/job-types", headers=as_ops)).json()["can_pause"] is True

    # queued jobs stay queued, new ones are still accepted, no claim takes them
    assert (await client.post("/jobs", json={"type": "noop"}, headers=as_a)).status_code == 202
    service = container.service()
    assert service.claim(10) == []
    shown = (await client.get(f"/jobs/{queued['id']}", headers=as_a)).json()
    assert shown["status"] == "queued"
    assert shown["waiting"][0]["code"] == "type_paused"

    resumed = await client.post("/job-types/noop/resume", headers=as_ops)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json() == {"name": "noop", "paused": False, "paused_at": None, "paused_by": None}
    assert len(service.claim(10)) == 2
    assert (await client.post("/job-types/noop/resume", headers=as_ops)).status_code == 200


async def test_an_internal_type_is_paused_by_an_operator_and_shown_to_operators_only(
    client: httpx.AsyncClient, as_ops: dict[str, str], as_a: dict[str, str]
) -> None:
    assert (await client.post("/job-types/internal/pause", headers=as_ops)).status_code == 200
    as_tenant = (await client.get("/job-types", headers=as_a)).json()
    assert as_tenant["paused"] == []
    assert "internal" not in [t["name"] for t in as_tenant["items"]]
    as_operator = (await client.get("/job-types", headers=as_ops)).json()
    assert [p["name"] for p in as_operator["paused"]] == ["internal"]
