"""``/schedules`` and ``/settings/retention`` over the API on PostgreSQL: org isolation, bad
input, public types only, operators only for the settings."""

from __future__ import annotations

import httpx
import pytest
from jobs_api.containers import Container

from tests.pooling import empty_tables

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture(params=["postgres"])
def container(request: pytest.FixtureRequest, clock):  # type: ignore[no-untyped-def]
    from dependency_injector import providers
    from jobs_api.containers import build_container
    from jobs_api.settings import ApiSettings

    from tests.api.helpers import make_registry

    engine = request.getfixturevalue("pg_engine")
    with engine.begin() as conn:
        empty_tables(conn, "schedules, schedule_runs, jobs_settings")
    built = build_container(
        ApiSettings(store="postgres", operator_orgs="ops, org-b"), [make_registry()]
    )
    built.engine.override(providers.Object(engine))
    built.clock.override(providers.Object(clock))
    yield built
    built.reset_override()


async def test_schedule_crud_is_org_scoped(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str], container: Container
) -> None:
    body = {"name": "hourly", "type": "noop", "cron": "0 * * * *", "timezone": "Europe/Paris"}
    created = await client.post("/schedules", json=body, headers=as_a)
    assert created.status_code == 201, created.text
    assert created.json()["next_run_at"] == "2026-01-01T01:00:00Z"
    assert (await client.post("/schedules", json=body, headers=as_a)).status_code == 409
    # Org B sees nothing of org A's, and answers 404 as for an absent one.
    assert (await client.get("/schedules", headers=as_b)).json() == []
    assert (await client.get("/schedules/hourly", headers=as_b)).status_code == 404
    assert (await client.delete("/schedules/hourly", headers=as_b)).status_code == 404
    assert (await client.post("/schedules/hourly/run", headers=as_b)).status_code == 404
    ran = await client.post("/schedules/hourly/run", headers=as_a)
    assert ran.status_code == 200
    job_id = ran.json()["last_job_id"]
    assert (await client.get(f"/jobs/{job_id}", headers=as_a)).json()["type"] == "noop"
    paused = await client.patch("/schedules/hourly", json={"enabled": False}, headers=as_a)
    assert paused.json()["enabled"] is False
    changed = await client.patch("/schedules/hourly", json={"cron": "*/5 * * * *"}, headers=as_a)
    assert changed.json()["cron"] == "*/5 * * * *"
    assert (await client.delete("/schedules/hourly", headers=as_a)).status_code == 204
    assert (await client.get("/schedules", headers=as_a)).json() == []
    assert (await client.get("/schedules")).status_code == 401


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"name": "x", "type": "internal", "cron": "* * * * *"}, 422),  # not public
        ({"name": "x", "type": "nope", "cron": "* * * * *"}, 422),
        ({"name": "x", "type": "noop", "cron": "99 * * * *"}, 422),
        ({"name": "x", "type": "noop", "cron": "* * * * *", "timezone": "Nowhere/X"}, 422),
        ({"name": "Bad Name", "type": "noop", "cron": "* * * * *"}, 422),
        ({"name": "x", "type": "greet", "cron": "* * * * *", "payload": {"bad": 1}}, 422),
        ({"name": "x", "type": "noop", "cron": "* * * * *", "missed": "never"}, 422),
        ({"name": "x", "type": "noop", "cron": "* * * * *", "extra": 1}, 422),
    ],
)
async def test_bad_schedules_are_422_with_a_reason(
    client: httpx.AsyncClient, as_a: dict[str, str], body: dict[str, object], status: int
) -> None:
    answer = await client.post("/schedules", json=body, headers=as_a)
    assert answer.status_code == status, answer.text
    assert answer.json()["detail"]


async def test_retention_settings_are_read_by_all_and_changed_by_operators(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    read = await client.get("/settings/retention", headers=as_a)
    assert read.json()["purge_enabled"] is True
    assert read.json()["default_policy"] is None
    refused = await client.patch("/settings/retention", json={"purge_enabled": False}, headers=as_a)
    assert refused.status_code == 403
    assert "JOBS_OPERATOR_ORGS" in refused.json()["detail"]
    changed = await client.patch(
        "/settings/retention",
        json={"purge_enabled": False, "default_policy": {"max_age_days": 30}},
        headers=as_b,  # org-b is an operator in this container
    )
    assert changed.status_code == 200, changed.text
    assert (await client.get("/settings/retention", headers=as_a)).json()["default_policy"] == {
        "max_age_days": 30,
        "keep_done": None,
        "keep_failed": None,
    }
    bad = await client.patch("/settings/retention", json={"batch_size": 0}, headers=as_b)
    assert bad.status_code == 422
