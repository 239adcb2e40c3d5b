"""Quotas per org over HTTP (issue 23, decision 0033): an enqueue over the org's queued quota or
its rate is a 429 with ``Retry-After`` and a problem naming the quota; another org is not held
back; a tenant's schedules are held to their count and their shortest interval (operators are
not); ``GET /quotas`` shows the org near its quota; the overrides are the operators'."""

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
from tests.pooling import empty_tables

pytestmark = pytest.mark.anyio

SMALL = {
    "quota_max_queued": 3,
    "quota_enqueue_rate": 1.0,
    "quota_enqueue_burst": 5,
    "quota_max_schedules": 2,
    "operator_orgs": "ops",
}


@pytest.fixture(params=ADAPTERS)
def container(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[Container]:
    """The app's container with small quotas, on each adapter."""
    store = request.param
    built = build_container(ApiSettings(store=store, **SMALL), [make_registry()])  # type: ignore[arg-type]
    if store == "postgres":
        engine = request.getfixturevalue("pg_engine")
        with engine.begin() as conn:
            empty_tables(conn, "schedules, schedule_runs, job_org_quotas")
        built.engine.override(providers.Object(engine))
    built.clock.override(providers.Object(clock))
    yield built
    built.reset_override()


@pytest.fixture
def as_ops(container: Container, clock: FakeClock) -> dict[str, str]:
    """Headers acting for the operator org."""
    token, _ = issue_token(container.token_store(), "ops", "tests", clock.now())
    return bearer(token)


async def test_an_enqueue_over_the_queued_quota_is_a_429_naming_it(
    client: httpx.AsyncClient,
    as_a: dict[str, str],
    as_b: dict[str, str],
    clock: FakeClock,
) -> None:
    for _i in range(3):
        assert (await client.post("/jobs", json={"type": "noop"}, headers=as_a)).status_code == 202
        clock.advance(1)
    over = await client.post("/jobs", json={"type": "noop"}, headers=as_a)
    assert over.status_code == 429, over.text
    assert over.headers["content-type"] == "application/problem+json"
    assert over.headers["Retry-After"] == "1"
    problem = over.json()
    assert problem["type"] == "urn:jobs:problem:quota-exceeded"
    assert (problem["quota"], problem["limit"], problem["used"]) == ("queued_jobs", 3, 3)
    assert "org-a" in problem["detail"]
    assert "raise the quota" in problem["detail"]
    # another org is not held back by org A's queue
    assert (await client.post("/jobs", json={"type": "noop"}, headers=as_b)).status_code == 202
    shown = (await client.get("/quotas", headers=as_a)).json()
    assert shown["usage"] == {"queued_jobs": 3, "schedules": 0}
    assert shown["quotas"]["max_queued"] == 3
    assert shown["near"] == [
        {"org": "org-a", "quota": "queued_jobs", "used": 3, "limit": 3, "fraction": 1.0}
    ]
    assert shown["enforced"] is True


async def test_an_enqueue_faster_than_the_rate_is_a_429_with_retry_after(
    client: httpx.AsyncClient, as_a: dict[str, str], as_ops: dict[str, str], clock: FakeClock
) -> None:
    raised = await client.put("/settings/quotas/org-a", json={"max_queued": 100}, headers=as_ops)
    assert raised.status_code == 200, raised.text
    assert raised.json()["overridden"] is True
    codes = [
        (await client.post("/jobs", json={"type": "noop"}, headers=as_a)).status_code
        for _ in range(6)
    ]
    assert codes == [202] * 5 + [429]
    over = await client.post("/jobs", json={"type": "noop"}, headers=as_a)
    assert over.json()["quota"] == "enqueue_rate"
    assert over.headers["Retry-After"] == "1"
    clock.advance(1)  # one job per second
    assert (await client.post("/jobs", json={"type": "noop"}, headers=as_a)).status_code == 202


async def test_only_operators_change_quotas(
    client: httpx.AsyncClient, as_a: dict[str, str], as_ops: dict[str, str]
) -> None:
    assert (await client.get("/settings/quotas", headers=as_a)).status_code == 403
    refused = await client.put("/settings/quotas/org-a", json={"max_queued": 9}, headers=as_a)
    assert refused.status_code == 403
    assert (await client.delete("/settings/quotas/org-a", headers=as_a)).status_code == 403
    bad = await client.put("/settings/quotas/org-a", json={"max_queued": -1}, headers=as_ops)
    assert bad.status_code == 422
    assert "max_queued" in bad.json()["detail"]
    unknown = await client.put("/settings/quotas/org-a", json={"jobs": 1}, headers=as_ops)
    assert unknown.status_code == 422
    assert "unknown quota" in unknown.json()["detail"]
    await client.put("/settings/quotas/org-a", json={"enqueue_rate": 20}, headers=as_ops)
    listed = (await client.get("/settings/quotas", headers=as_ops)).json()
    assert listed["defaults"]["max_queued"] == 3
    assert [(o["org"], o["enqueue_rate"], o["updated_by"]) for o in listed["overrides"]] == [
        ("org-a", 20.0, "api:ops")
    ]
    assert (await client.get("/quotas", headers=as_a)).json()["quotas"]["enqueue_rate"] == 20.0
    assert (await client.delete("/settings/quotas/org-a", headers=as_ops)).status_code == 204
    assert (await client.get("/settings/quotas", headers=as_ops)).json()["overrides"] == []


@pytest.mark.postgres
@pytest.mark.parametrize("container", ["postgres"], indirect=True)
async def test_a_tenants_schedules_are_held_to_their_count_and_interval(
    client: httpx.AsyncClient, as_a: dict[str, str], as_ops: dict[str, str], clock: FakeClock
) -> None:
    every_second = {"name": "flood", "type": "noop", "cron": "* * * * * *"}
    refused = await client.post("/schedules", json=every_second, headers=as_a)
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert (problem["quota"], problem["limit"], problem["used"]) == ("schedule_interval", 60, 1)
    assert problem["errors"][0]["loc"] == ["body", "cron"]
    twice_a_minute = {"name": "half", "type": "noop", "cron": "0,30 * * * * *"}
    assert (await client.post("/schedules", json=twice_a_minute, headers=as_a)).json()["used"] == 30
    # an operator may schedule by the second
    assert (await client.post("/schedules", json=every_second, headers=as_ops)).status_code == 201
    for name in ("one", "two"):
        body = {"name": name, "type": "noop", "cron": "*/5 * * * *"}
        assert (await client.post("/schedules", json=body, headers=as_a)).status_code == 201
    third = await client.post(
        "/schedules", json={"name": "three", "type": "noop", "cron": "0 * * * *"}, headers=as_a
    )
    assert third.status_code == 409, third.text
    assert (third.json()["quota"], third.json()["used"]) == ("schedules", 2)
    # a change to a per-second cron is held to the interval too
    changed = await client.patch("/schedules/one", json={"cron": "*/2 * * * * *"}, headers=as_a)
    assert changed.status_code == 422
    assert changed.json()["quota"] == "schedule_interval"
    shown = (await client.get("/quotas", headers=as_a)).json()
    assert shown["usage"]["schedules"] == 2
    assert [n["quota"] for n in shown["near"]] == ["schedules"]
    # running a schedule now is an enqueue of the org: under its queued quota
    for _ in range(3):
        assert (await client.post("/schedules/one/run", headers=as_a)).status_code == 200
        clock.advance(1)
    ran = await client.post("/schedules/one/run", headers=as_a)
    assert ran.status_code == 429
    assert ran.json()["quota"] == "queued_jobs"
