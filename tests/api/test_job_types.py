"""``GET /job-types``: the public types with what a UI needs (docs/events.md)."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.anyio


async def test_lists_public_types_only_sorted_with_their_declarations(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    answer = await client.get("/job-types", headers=as_a)
    assert answer.status_code == 200
    items = answer.json()["items"]
    names = [t["name"] for t in items]
    assert names == ["crawl", "exclusive", "greet", "history", "noop"]  # "internal" never listed
    by_name = {t["name"]: t for t in items}
    greet = by_name["greet"]
    assert greet["payload_schema"]["properties"]["name"]["type"] == "string"
    assert greet["payload_schema"]["required"] == ["name"]
    assert by_name["noop"]["payload_schema"] == {"type": "object"}
    assert by_name["exclusive"]["dedup_scope"] == "active"
    assert by_name["noop"]["dedup_scope"] == "queue"
    assert all(t["max_attempts"] == 3 and t["public"] is True for t in items)
    assert all(t["applies_to"] == [] and t["description"] == "" for t in items)
    # What a UI needs to leave out Delete: only "history" keeps its jobs for good.
    assert {t["name"] for t in items if t["protected"]} == {"history"}


async def test_applies_to_and_description_are_shown() -> None:
    from jobs_api.app import create_app
    from jobs_api.containers import build_container
    from jobs_api.settings import ApiSettings
    from jobs_core import JobType, Registry, SystemClock
    from jobs_tokens import issue_token

    registry = Registry("menus")
    registry.register(
        JobType(
            "enrich",
            lambda ctx: None,
            public=True,
            max_attempts=5,
            description="Enrich a site.",
            applies_to=("site", "page"),
        )
    )
    container = build_container(ApiSettings(store="memory"), [registry])
    token, _ = issue_token(container.token_store(), "org", None, SystemClock().now())
    transport = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        items = (await http.get("/job-types", headers={"Authorization": f"Bearer {token}"})).json()[
            "items"
        ]
    assert items == [
        {
            "name": "enrich",
            "description": "Enrich a site.",
            "payload_schema": {"type": "object"},
            "dedup_scope": "queue",
            "max_attempts": 5,
            "public": True,
            "protected": False,
            "applies_to": ["site", "page"],
            "paused_at": None,
            "paused_by": None,
        }
    ]


async def test_requires_authentication(client: httpx.AsyncClient) -> None:
    answer = await client.get("/job-types")
    assert answer.status_code == 401
    bad = await client.get("/job-types", headers={"Authorization": "Bearer jobs_" + "x" * 43})
    assert bad.status_code == 401
