"""The module's routes, mounted by the API's own app (``create_app``) from the declaration,
on the test database; the crawls they start are run by the testing kit."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dependency_injector import providers
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock, Registry
from jobs_core.testing import JobsHarness
from jobs_linkcheck.module import module
from jobs_tokens import issue_token
from sqlalchemy import Engine

from examples.linkcheck.tests.conftest import SETTINGS
from examples.linkcheck.tests.site import serving, small_site

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def container_for(engine: Engine, data_dir: Path, settings: dict[str, str]) -> Container:
    """The API's container as ``jobs api`` builds it with the module enabled."""
    built = build_container(
        ApiSettings(store="postgres", data_dir=data_dir), [Registry("none")], modules=[module]
    )
    built.engine.override(providers.Object(engine))
    built.clock.override(providers.Object(FakeClock()))
    built.module_settings.override(providers.Object(settings))
    return built


@pytest.fixture
def container(engine: Engine, tmp_path: Path) -> Iterator[Container]:
    built = container_for(engine, tmp_path, SETTINGS)
    yield built
    built.reset_override()


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(container), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


def auth(container: Container, org: str) -> dict[str, str]:
    token, _ = issue_token(container.token_store(), org, "tests", container.clock().now())
    return {"Authorization": f"Bearer {token}"}


async def test_start_a_crawl_follow_it_and_read_its_broken_links(
    container: Container, client: httpx.AsyncClient
) -> None:
    acme, other = auth(container, "acme"), auth(container, "other")
    with serving(small_site()) as site:
        path = f"/linkcheck/sites/{site.site}/crawls"
        body = {"start_url": site.url("/"), "max_pages": 50}
        assert (await client.post(path, json=body)).status_code == 401  # never anonymous
        started = await client.post(path, json=body, headers=acme)
        assert started.status_code == 202, started.text
        crawl: dict[str, Any] = started.json()
        assert (crawl["status"], crawl["site"], crawl["max_pages"]) == ("queued", site.site, 50)
        again = await client.post(path, json={"max_pages": 3}, headers=acme)
        assert (again.status_code, again.json()["id"]) == (200, crawl["id"])  # one per site

        JobsHarness(service=container.service(), org="acme").drain()  # what a worker does

        done = (await client.get(f"{path}/{crawl['id']}", headers=acme)).json()
        assert (done["status"], done["pages"], done["broken"]) == ("done", 10, 2)
        broken = await client.get(f"{path}/{crawl['id']}/results?broken=true", headers=acme)
        assert [
            (r["url"], r["status_code"], r["linked_from"]) for r in broken.json()["results"]
        ] == [
            (site.url("/error"), 500, [site.url("/b")]),
            (site.url("/missing"), 404, [site.url("/")]),
        ]
        everything = (await client.get(f"{path}/{crawl['id']}/results", headers=acme)).json()
        moved = next(r for r in everything["results"] if r["url"] == site.url("/moved"))
        assert (moved["status_code"], moved["location"]) == (301, site.url("/c"))
        listed = (await client.get(path, headers=acme)).json()["crawls"]
        assert [c["id"] for c in listed] == [crawl["id"]]
        # the crawl's id is its job's: the jobs routes show and cancel it
        job = (await client.get(f"/jobs/{crawl['id']}", headers=acme)).json()
        assert job["type"] == "linkcheck_crawl"
        # another org sees nothing of it
        assert (await client.get(f"{path}/{crawl['id']}", headers=other)).status_code == 404
        assert (await client.get(path, headers=other)).json() == {"crawls": []}


async def test_a_crawl_is_refused_when_its_request_is_wrong(
    container: Container, client: httpx.AsyncClient
) -> None:
    acme = auth(container, "acme")
    elsewhere = await client.post(
        "/linkcheck/sites/example.com/crawls",
        json={"start_url": "https://example.org/"},
        headers=acme,
    )
    assert elsewhere.status_code == 422
    assert "start_url must be an http(s) URL of the site" in elsewhere.text
    for site in ("Example.com", "example.com:443", "user@example.com"):
        bad = await client.post(f"/linkcheck/sites/{site}/crawls", json={}, headers=acme)
        assert bad.status_code == 422, site
    too_many = await client.post(
        "/linkcheck/sites/example.com/crawls", json={"max_pages": 100_000}, headers=acme
    )
    assert too_many.status_code == 422


async def test_a_private_site_is_refused_unless_the_deployment_allows_it(
    engine: Engine, tmp_path: Path
) -> None:
    strict = container_for(engine, tmp_path, {})
    transport = httpx.ASGITransport(app=create_app(strict), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        refused = await http.post(
            "/linkcheck/sites/127.0.0.1:8080/crawls", json={}, headers=auth(strict, "acme")
        )
    assert refused.status_code == 422
    assert "not a public address" in refused.text
