"""The API under test: one container per test, on the in-memory store and on PostgreSQL.

The container is the app's own (``build_container``); tests only override providers: the clock
with a ``FakeClock`` and, for PostgreSQL, the engine with the root ``pg_engine`` fixture (a fresh
migrated database), so the ``Selector`` builds the real PostgreSQL stores on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from dependency_injector import providers
from fastapi import FastAPI
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock
from jobs_tokens import issue_token

from tests.api.helpers import make_registry

ADAPTERS = ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]

ORG_A = "org-a"
ORG_B = "org-b"


@pytest.fixture
def anyio_backend() -> str:
    """The API tests drive the ASGI app on asyncio (what uvicorn runs)."""
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture(params=ADAPTERS)
def container(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[Container]:
    """The app's container on each adapter, with a fake clock."""
    if request.param == "memory":
        built = build_container(ApiSettings(store="memory"), [make_registry()])
    else:
        built = build_container(ApiSettings(store="postgres"), [make_registry()])
        built.engine.override(providers.Object(request.getfixturevalue("pg_engine")))
    built.clock.override(providers.Object(clock))
    yield built
    built.reset_override()


@pytest.fixture
def app(container: Container) -> FastAPI:
    """The FastAPI app over the test container."""
    return create_app(container)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client speaking to the app in process (unexpected errors answered, not raised,
    as a server would)."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


def bearer(token: str) -> dict[str, str]:
    """The ``Authorization`` header of a token."""
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def token_a(container: Container, clock: FakeClock) -> str:
    """A live token of org A."""
    token, _ = issue_token(container.token_store(), ORG_A, "tests", clock.now())
    return token


@pytest.fixture
def token_b(container: Container, clock: FakeClock) -> str:
    """A live token of org B."""
    token, _ = issue_token(container.token_store(), ORG_B, "tests", clock.now())
    return token


@pytest.fixture
def as_a(token_a: str) -> dict[str, str]:
    """Headers acting for org A."""
    return bearer(token_a)


@pytest.fixture
def as_b(token_b: str) -> dict[str, str]:
    """Headers acting for org B."""
    return bearer(token_b)
