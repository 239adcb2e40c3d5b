"""A module's own routes, mounted by the API (decision 0024): where a payload error they raise is
reported, and a router whose OpenAPI schema cannot be built failing the start with the module's
name (issue 25's rough edges). In memory: the routes are the module's, not the store's."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations as written.

from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import httpx
import pytest
from dependency_injector import providers
from fastapi import APIRouter, Body, Depends, FastAPI
from jobs_api.app import ModuleRoutesInvalid, create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock
from jobs_core.modules import Module, RouteContext
from pydantic import BaseModel, ConfigDict

from tests.api.conftest import bearer
from tests.api.helpers import make_registry

pytestmark = pytest.mark.anyio


class CrawlIn(BaseModel):
    """The module's own body: the crawl's fields, no ``payload``."""

    site_id: int
    depth: int = 1


class Opaque:
    """A type pydantic has no JSON schema for."""


class BadIn(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    thing: Opaque


def _routers(ctx: RouteContext) -> list[APIRouter]:
    router = APIRouter()
    org_dep = Annotated[str, Depends(ctx.current_org)]

    @router.post("/crawls")
    def start_crawl(body: CrawlIn, org: org_dep) -> dict[str, Any]:
        # the payload is built from the body's fields: ``site_id`` is checked by the type
        registry = make_registry()
        registry.new_job(org, "crawl", {"site_id": body.site_id - 10})
        return {}

    @router.post("/crawls/raw")
    def start_raw(org: org_dep, text: Annotated[str, Body(embed=True)]) -> dict[str, Any]:
        make_registry().new_job(org, "crawl", {"site_id": 0, "from": text})
        return {}

    return [router]


def _container(clock: FakeClock, module: Module) -> Container:
    built = build_container(ApiSettings(store="memory"), [make_registry()])
    built.clock.override(providers.Object(clock))
    built.modules.override(providers.Object((module,)))
    return built


@pytest.fixture
def container() -> Iterator[Container]:
    built = _container(FakeClock(), Module("crawler", routers=_routers))
    yield built
    built.reset_override()


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(container)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


async def test_a_payload_error_of_a_module_route_names_the_body_field(
    client: httpx.AsyncClient, token_a: str
) -> None:
    response = await client.post("/crawls", json={"site_id": 3}, headers=bearer(token_a))
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"] == ["body", "site_id"]


async def test_a_payload_error_on_no_body_field_is_located_in_the_payload(
    client: httpx.AsyncClient, token_a: str
) -> None:
    response = await client.post("/crawls/raw", json={"text": "x"}, headers=bearer(token_a))
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"] == ["payload", "site_id"]


async def test_post_jobs_still_locates_payload_errors_under_the_body_payload(
    client: httpx.AsyncClient, token_a: str
) -> None:
    response = await client.post(
        "/jobs", json={"type": "crawl", "payload": {"site_id": 0}}, headers=bearer(token_a)
    )
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"] == ["body", "payload", "site_id"]


def test_a_router_whose_schema_cannot_be_built_fails_the_start_with_the_module_name() -> None:
    def routers(ctx: RouteContext) -> list[APIRouter]:
        router = APIRouter()

        @router.post("/bad")
        def bad(body: BadIn) -> dict[str, Any]:
            return {}

        return [router]

    container = _container(FakeClock(), Module("badschema", routers=routers))
    with pytest.raises(ModuleRoutesInvalid, match="module 'badschema': the OpenAPI schema"):
        create_app(container)
    container.reset_override()
