"""The API-import routes over HTTP (the API's own app and container on PostgreSQL), and the
secret: the token of an API source never appears in an answer of the API, in the job's payload,
progress, report, error or events, nor in a log line — whether the import succeeds or fails."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from dependency_injector import providers
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock, Registry
from jobs_imports.module import module as imports_module
from sqlalchemy import text

from tests.imports.api_kit import (  # noqa: F401 (fixtures: pytest sees them)
    anyio_backend_fixture,
    as_a_fixture,
    as_b_fixture,
    client_fixture,
    module_fixture,
    new_target,
)
from tests.imports.api_source_kit import source_fixture  # noqa: F401 (a fixture)
from tests.imports.fake_source import TOKEN, Answer, FakeSource
from tests.imports.helpers import drain

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


@pytest.fixture(name="container")
def container_fixture(imports_engine: Engine, data_dir: Path) -> Iterator[Container]:
    """The API's container on the test database, allowing private URLs (the fake source is on
    127.0.0.1), as ``JOBS_ALLOW_PRIVATE_URLS=1`` does."""
    settings = ApiSettings(store="postgres", data_dir=data_dir, allow_private_urls=True)
    built = build_container(settings, [Registry("none")], modules=[imports_module])
    built.engine.override(providers.Object(imports_engine))
    built.clock.override(providers.Object(FakeClock()))
    yield built
    built.reset_override()


async def configure(
    client: httpx.AsyncClient, headers: dict[str, str], target_id: str, url: str
) -> httpx.Response:
    return await client.put(
        f"/site-targets/{target_id}/api-source",
        json={"base_url": url, "token": TOKEN},
        headers=headers,
    )


async def start(
    client: httpx.AsyncClient, headers: dict[str, str], target_id: str, days: tuple[str, str]
) -> httpx.Response:
    return await client.post(
        "/imports/api",
        json={"site_target_id": target_id, "date_from": days[0], "date_to": days[1]},
        headers=headers,
    )


async def test_configure_then_import_a_range(
    client: httpx.AsyncClient,
    as_a: dict[str, str],
    as_b: dict[str, str],
    module: ImportsModule,
    source: FakeSource,
) -> None:
    target = await new_target(client, as_a)
    path = f"/site-targets/{target['id']}/api-source"
    assert (await client.get(path, headers=as_a)).status_code == 404
    no_source = await start(client, as_a, target["id"], ("2025-01-01", "2025-01-31"))
    assert no_source.status_code == 409
    assert "no API source" in no_source.json()["detail"]

    configured = await configure(client, as_a, target["id"], source.url)
    assert configured.status_code == 200, configured.text
    assert configured.json()["token_configured"] is True
    assert configured.json()["base_url"] == source.url
    assert (await client.get(path, headers=as_b)).status_code == 404  # another org's

    started = await start(client, as_a, target["id"], ("2025-01-01", "2025-01-31"))
    assert started.status_code == 202, started.text
    body = started.json()
    assert (body["kind"], body["file"], body["date_from"]) == ("api", None, "2025-01-01")
    assert started.headers["Location"] == f"/imports/{body['id']}"
    again = await start(client, as_a, target["id"], ("2025-01-01", "2025-01-31"))
    assert again.status_code == 200
    assert again.json()["id"] == body["id"]

    drain(module)
    done = (await client.get(f"/imports/{body['id']}", headers=as_a)).json()
    assert done["status"] == "done"
    assert done["counts"]["read"] == 10
    assert done["counts"]["errors"] == 1


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"base_url": "https://u:p@api.example.net/r", "token": "t"}, 422),
        ({"base_url": "https://api.example.net/r", "token": "has space"}, 422),
        ({"base_url": "https://api.example.net/r"}, 422),
        ({"base_url": "https://api.example.net/r", "token": "x" * 5000}, 422),
    ],
)
async def test_a_bad_source_is_refused(
    client: httpx.AsyncClient, as_a: dict[str, str], body: dict[str, Any], status: int
) -> None:
    target = await new_target(client, as_a)
    response = await client.put(f"/site-targets/{target['id']}/api-source", json=body, headers=as_a)
    assert response.status_code == status, response.text


async def test_a_bad_range_is_refused(
    client: httpx.AsyncClient, as_a: dict[str, str], source: FakeSource
) -> None:
    target = await new_target(client, as_a)
    await configure(client, as_a, target["id"], source.url)
    backwards = await start(client, as_a, target["id"], ("2025-02-01", "2025-01-01"))
    assert backwards.status_code == 422
    assert "date_to is before date_from" in backwards.text
    assert (
        await start(client, as_a, target["id"], ("2025-13-01", "2025-01-01"))
    ).status_code == 422


async def test_the_token_never_appears_anywhere(
    client: httpx.AsyncClient,
    as_a: dict[str, str],
    *,
    module: ImportsModule,
    source: FakeSource,
    imports_engine: Engine,
    container: Container,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx's included
    echo = f'{{"error": "bad token {TOKEN}"}}'.encode()  # a source echoing the token
    source.fail(2, Answer(503, body=echo))
    target = await new_target(client, as_a)
    seen = [(await configure(client, as_a, target["id"], source.url)).text]
    seen.append((await client.get(f"/site-targets/{target['id']}/api-source", headers=as_a)).text)
    done = (await start(client, as_a, target["id"], ("2025-01-01", "2025-01-01"))).json()
    drain(module)  # a 503: retried after a backoff
    clock = container.clock()
    assert isinstance(clock, FakeClock)
    clock.advance(3600)
    drain(module)
    source.fail(1, Answer(401, body=echo))
    failed = (await start(client, as_a, target["id"], ("2025-01-02", "2025-01-02"))).json()
    drain(module)
    for started in (done, failed):
        seen.append((await client.get(f"/imports/{started['id']}", headers=as_a)).text)
        seen.append((await client.get(f"/jobs/{started['job']['id']}", headers=as_a)).text)
    seen.append((await client.get(f"/imports?site_target_id={target['id']}", headers=as_a)).text)
    seen.append((await client.get("/jobs", headers=as_a)).text)
    assert '"status":"done"' in seen[3]
    assert '"status":"failed"' in seen[5]
    assert "HTTP 401" in seen[5]
    with imports_engine.connect() as conn:
        seen.extend(str(tuple(row)) for row in conn.execute(text("SELECT * FROM jobs")))
        seen.extend(str(tuple(row)) for row in conn.execute(text("SELECT * FROM job_events")))
        seen.extend(str(tuple(row)) for row in conn.execute(text("SELECT * FROM imports")))
    seen.extend(record.getMessage() for record in caplog.records)
    assert len(seen) > 12
    assert all(TOKEN not in text for text in seen)
    assert any(f"Bearer {TOKEN}" == r.authorization for r in source.requests)  # it was sent
