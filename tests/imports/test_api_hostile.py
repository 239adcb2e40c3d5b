"""The Imports routes against hostile requests (issue 11, findings 2, 3, 5 and 7): authentication
before the body, values no database can hold, SSRF through site targets, the OpenAPI document's
problems. The fixtures are the ones of ``test_api.py`` (``api_kit.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from dependency_injector import providers
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import Registry
from jobs_imports.module import module as imports_module
from sqlalchemy import text

from tests.imports.api_kit import (  # noqa: F401 (fixtures: pytest sees them)
    CSV,
    UPLOAD_LIMIT,
    anyio_backend_fixture,
    as_a_fixture,
    as_b_fixture,
    client_fixture,
    container_fixture,
    headers_of,
    module_fixture,
    new_target,
    upload_csv,
)
from tests.imports.helpers import ORG

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


# ---- authentication before the body (issue 11, finding 3) -----------------------------------


async def _call_without_a_body(
    container: Container, headers: list[tuple[bytes, bytes]]
) -> tuple[int, dict[bytes, bytes], int]:
    """POST /imports/csv to the app announcing a 1 MB multipart body (within the upload limit),
    and answer with its status, its headers and how many times the app asked for the body."""
    app = create_app(container)
    asked = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": b"x" * 1_000_000, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/imports/csv",
        "raw_path": b"/imports/csv",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"api.test"),
            (b"content-type", b"multipart/form-data; boundary=xyz"),
            (b"content-length", str(1_000_000).encode()),
            *headers,
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], dict(start["headers"]), asked


@pytest.mark.parametrize(
    "authorization",
    [None, b"Bearer jobs_" + b"A" * 43, b"Bearer not-a-token", b"Basic dXNlcjpwYXNz"],
    ids=["anonymous", "unknown-token", "malformed-token", "basic"],
)
async def test_an_upload_without_a_live_token_is_refused_before_its_body_is_read(
    container: Container, data_dir: Path, authorization: bytes | None
) -> None:
    headers = [] if authorization is None else [(b"authorization", authorization)]
    status, response_headers, asked = await _call_without_a_body(container, headers)
    assert status == 401
    assert asked == 0, "the app read the body of a request it refused"
    assert response_headers[b"www-authenticate"] == b"Bearer"
    assert response_headers[b"connection"] == b"close"  # a large unread body: not kept
    assert not list(data_dir.rglob("*"))


async def test_a_live_token_reaches_the_upload_route(
    container: Container, as_a: dict[str, str]
) -> None:
    token = as_a["Authorization"].encode()
    status, _, asked = await _call_without_a_body(container, [(b"authorization", token)])
    assert asked > 0  # the route read the body: authentication let it through
    assert status != 401


# ---- hostile input (issue 11, findings 2 and 5) ---------------------------------------------


def _varied_cjk(count: int) -> str:
    """``count`` distinct CJK characters (a repeated one would compress below index limits)."""
    return "".join(chr(0x4E00 + index) for index in range(count))


@pytest.mark.parametrize(
    ("name", "base_url", "field"),
    [
        ("Nul\x00name", "www.example.com", "name"),
        ("Example", "www.example.com/\x00", "base_url"),
        ("\u6f22" * 2000, "www.example.com", "name"),
        ("Example", "https://www.example.com/" + _varied_cjk(2000), "base_url"),
    ],
    ids=["nul-name", "nul-url", "cjk-name", "cjk-url"],
)
async def test_a_site_target_that_cannot_be_stored_is_a_422_naming_the_field(
    client: httpx.AsyncClient, as_a: dict[str, str], name: str, base_url: str, field: str
) -> None:
    response = await client.post(
        "/site-targets", json={"name": name, "base_url": base_url}, headers=as_a
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    named = [error["loc"][-1] for error in body.get("errors") or []] + [body["detail"]]
    assert any(field in str(item) for item in named), body


async def test_a_lone_surrogate_in_a_site_target_name_is_a_422(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    response = await client.post(
        "/site-targets",
        content=b'{"name": "x\\ud800", "base_url": "www.example.com"}',
        headers={**as_a, "content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", "name"]


async def test_a_page_url_too_long_to_index_is_an_invalid_url_not_an_outage(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    target = await new_target(client, as_a)
    # varied characters: a repeated one would compress below the index's limit
    noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(125))
    long_url = "https://www.example.com/" + noise[:8000]
    response = await client.post(
        f"/site-targets/{target['id']}/pages",
        json={"urls": [long_url, "/fine"]},
        headers=as_a,
    )
    assert response.status_code == 200, response.text
    loaded = response.json()
    assert (loaded["added"], loaded["invalid"]) == (1, 1)
    assert "longer than 2048 characters" in loaded["invalid_samples"][0]["reason"]


async def test_a_nul_in_the_file_name_is_refused_before_the_file_is_stored(
    client: httpx.AsyncClient, as_a: dict[str, str], data_dir: Path
) -> None:
    target = await new_target(client, as_a)
    # Built by hand: httpx would percent-encode the NUL, a hostile client sends it raw.
    body = (
        b"--b0undary\r\n"
        b'Content-Disposition: form-data; name="site_target_id"\r\n\r\n'
        + target["id"].encode()
        + b"\r\n--b0undary\r\n"
        b'Content-Disposition: form-data; name="file"; filename="export\x00.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\n" + CSV.encode() + b"\r\n--b0undary--\r\n"
    )
    response = await client.post(
        "/imports/csv",
        content=body,
        headers={**as_a, "content-type": "multipart/form-data; boundary=b0undary"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", "file", "filename"]
    assert not [path for path in data_dir.rglob("*") if path.is_file()]


# ---- SSRF and the OpenAPI document (issue 11, finding 7) ------------------------------------


async def test_a_site_target_on_a_non_public_host_is_a_422(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    for base_url in ("http://127.0.0.1:8000", "http://0x7f.1/", "http://[::ffff:10.0.0.1]/"):
        response = await client.post(
            "/site-targets", json={"name": "Internal", "base_url": base_url}, headers=as_a
        )
        assert response.status_code == 422, response.text
        assert "JOBS_ALLOW_PRIVATE_URLS" in response.json()["detail"]
    target = await new_target(client, as_a)
    pages = await client.post(
        f"/site-targets/{target['id']}/pages",
        json={"urls": ["http://169.254.169.254/latest/meta-data/", "/ok"]},
        headers=as_a,
    )
    assert (pages.json()["added"], pages.json()["invalid"]) == (1, 1)
    assert "link-local" in pages.json()["invalid_samples"][0]["reason"]


async def test_private_urls_are_allowed_with_the_development_opt_out(
    imports_engine: Engine, data_dir: Path
) -> None:
    settings = ApiSettings(store="postgres", data_dir=data_dir, allow_private_urls=True)
    container = build_container(settings, [Registry("none")], modules=[imports_module])
    container.engine.override(providers.Object(imports_engine))
    transport = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        response = await http.post(
            "/site-targets",
            json={"name": "Local", "base_url": "http://localhost:3000"},
            headers=headers_of(container, ORG),
        )
    assert response.status_code == 201, response.text


async def test_the_imports_routes_document_their_errors_as_problems(
    client: httpx.AsyncClient,
) -> None:
    schema = (await client.get("/openapi.json")).json()
    expected = {
        ("/site-targets", "post"): {"401", "409", "422"},
        ("/site-targets/{site_target_id}", "get"): {"401", "404"},
        ("/imports/csv", "post"): {"401", "404", "413", "422"},
        ("/imports/{import_id}", "get"): {"401", "404"},
        ("/imports", "get"): {"401", "404", "422"},
    }
    for (path, method), statuses in expected.items():
        responses = schema["paths"][path][method]["responses"]
        assert statuses <= set(responses), (path, method, set(responses))
        for status, response in responses.items():
            if status[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], (path, status)
                ref = response["content"]["application/problem+json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/Problem"


async def test_a_value_the_database_refuses_is_a_422_not_a_503(
    client: httpx.AsyncClient, as_a: dict[str, str], imports_engine: Engine
) -> None:
    # A real refusal by PostgreSQL (SQLSTATE 22001: too long for the column), whatever the
    # API's own checks let through: permanent, so never "unavailable, retry later".
    with imports_engine.begin() as conn:
        conn.execute(text("ALTER TABLE site_targets ALTER COLUMN name TYPE varchar(10)"))
    try:
        response = await client.post(
            "/site-targets",
            json={"name": "a name longer than ten", "base_url": "www.example.com"},
            headers=as_a,
        )
        again = await client.get("/site-targets", headers=as_a)  # the server is fine
    finally:
        with imports_engine.begin() as conn:
            conn.execute(text("ALTER TABLE site_targets ALTER COLUMN name TYPE text"))
    assert response.status_code == 422, response.text
    assert response.json()["type"] == "urn:jobs:problem:store-refused"
    assert "22001" in response.json()["detail"]
    assert "retry-after" not in response.headers
    assert again.status_code == 200
