"""The app, the container and the clients of the Imports routes' HTTP tests (``test_api.py``,
``test_api_hostile.py``): the API's own app and container on the test database."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from dependency_injector import providers
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock, Registry
from jobs_imports.module import module as imports_module
from jobs_tokens import issue_token

from tests.imports.helpers import HEADER, ORG, ORG_B

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine


UPLOAD_LIMIT = 4096

CSV = HEADER + (
    "https://www.example.com/a,shoes,10,100,10%,1.5,2025-01-01\n"
    "/b,boots,5,50,10%,2.5,2025-01-01\n"
    "https://www.example.com/c,x,not-a-number,50,10%,2.5,2025-01-01\n"
)


@pytest.fixture(name="anyio_backend")
def anyio_backend_fixture() -> str:
    """The API runs on asyncio (what uvicorn runs)."""
    return "asyncio"


@pytest.fixture(name="container")
def container_fixture(imports_engine: Engine, data_dir: Path) -> Iterator[Container]:
    """The API's container as ``jobs api`` builds it, on the test database."""
    settings = ApiSettings(store="postgres", data_dir=data_dir, max_upload_bytes=UPLOAD_LIMIT)
    built = build_container(settings, [Registry("none")], modules=[imports_module])
    built.engine.override(providers.Object(imports_engine))
    built.clock.override(providers.Object(FakeClock()))
    yield built
    built.reset_override()


@pytest.fixture(name="module")
def module_fixture(container: Container) -> ImportsModule:
    """The Imports module as the API's routes build it (same engine, data dir, clock)."""
    from jobs_imports.module import build_service_module

    return build_service_module(container.module_context())


@pytest.fixture(name="client")
async def client_fixture(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client speaking to the app in process."""
    transport = httpx.ASGITransport(app=create_app(container), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


def headers_of(container: Container, org: str) -> dict[str, str]:
    token, _ = issue_token(container.token_store(), org, "tests", container.clock().now())
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(name="as_a")
def as_a_fixture(container: Container) -> dict[str, str]:
    """Headers acting for ``ORG``."""
    return headers_of(container, ORG)


@pytest.fixture(name="as_b")
def as_b_fixture(container: Container) -> dict[str, str]:
    """Headers acting for ``ORG_B``."""
    return headers_of(container, ORG_B)


async def new_target(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post(
        "/site-targets",
        json={"name": "Example", "base_url": "www.example.com"},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def upload_csv(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    target_id: str,
    content: bytes,
    name: str = "export.csv",
    *,
    force: bool | None = None,
) -> httpx.Response:
    data = {"site_target_id": target_id}
    if force is not None:
        data["force"] = "true" if force else "false"
    return await client.post(
        "/imports/csv",
        data=data,
        files={"file": (name, io.BytesIO(content), "text/csv")},
        headers=headers,
    )
