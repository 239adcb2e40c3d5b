"""The Imports routes over HTTP (httpx against the API app, the real container on PostgreSQL).

The app is the API's own (``create_app``) with the container the deployable builds
(``build_container(..., modules=[the Imports module declaration])``); tests only override the
engine (the test database) and the clock, and run the queued jobs in process with the module
built on the same engine, data directory and clock.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import AsyncIterator, Iterator, MutableMapping
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
from sqlalchemy import text

from tests.imports.helpers import HEADER, ORG, ORG_B, drain

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

UPLOAD_LIMIT = 4096

CSV = HEADER + (
    "https://www.example.com/a,shoes,10,100,10%,1.5,2025-01-01\n"
    "/b,boots,5,50,10%,2.5,2025-01-01\n"
    "https://www.example.com/c,x,not-a-number,50,10%,2.5,2025-01-01\n"
)


@pytest.fixture
def anyio_backend() -> str:
    """The API runs on asyncio (what uvicorn runs)."""
    return "asyncio"


@pytest.fixture
def container(imports_engine: Engine, data_dir: Path) -> Iterator[Container]:
    """The API's container as ``jobs api`` builds it, on the test database."""
    settings = ApiSettings(store="postgres", data_dir=data_dir, max_upload_bytes=UPLOAD_LIMIT)
    built = build_container(settings, [Registry("none")], modules=[imports_module])
    built.engine.override(providers.Object(imports_engine))
    built.clock.override(providers.Object(FakeClock()))
    yield built
    built.reset_override()


@pytest.fixture
def module(container: Container) -> ImportsModule:
    """The Imports module as the API's routes build it (same engine, data dir, clock)."""
    from jobs_imports.module import build_service_module

    return build_service_module(container.module_context())


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client speaking to the app in process."""
    transport = httpx.ASGITransport(app=create_app(container), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


def _headers(container: Container, org: str) -> dict[str, str]:
    token, _ = issue_token(container.token_store(), org, "tests", container.clock().now())
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def as_a(container: Container) -> dict[str, str]:
    """Headers acting for ``ORG``."""
    return _headers(container, ORG)


@pytest.fixture
def as_b(container: Container) -> dict[str, str]:
    """Headers acting for ``ORG_B``."""
    return _headers(container, ORG_B)


async def _target(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post(
        "/site-targets",
        json={"name": "Example", "base_url": "www.example.com"},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def _upload(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    target_id: str,
    content: bytes,
    name: str = "export.csv",
) -> httpx.Response:
    return await client.post(
        "/imports/csv",
        data={"site_target_id": target_id},
        files={"file": (name, io.BytesIO(content), "text/csv")},
        headers=headers,
    )


async def test_upload_import_read_back_with_counts_and_reconcile_events(
    client: httpx.AsyncClient, module: ImportsModule, as_a: dict[str, str], data_dir: Path
) -> None:
    target = await _target(client, as_a)
    assert target["base_url"] == "https://www.example.com/"

    response = await _upload(client, as_a, target["id"], CSV.encode(), "../../secret.csv")
    assert response.status_code == 202, response.text
    created = response.json()
    assert response.headers["location"] == f"/imports/{created['id']}"
    assert created["status"] == "pending"
    assert created["file"]["name"] == "../../secret.csv"
    sha = created["file"]["sha256"]
    assert (data_dir / "imports" / sha[:2] / f"{sha}.csv").read_bytes() == CSV.encode()
    assert not (data_dir.parent / "secret.csv").exists()
    assert created["job"]["type"] == "import_csv"
    assert created["job"]["status"] == "queued"

    pages = await client.post(
        f"/site-targets/{target['id']}/pages",
        json={"urls": ["/a", "mailto:x@example.com"]},
        headers=as_a,
    )
    assert pages.status_code == 200, pages.text
    loaded = pages.json()
    assert (loaded["received"], loaded["added"], loaded["invalid"]) == (2, 1, 1)
    assert loaded["reconcile_job"]["type"] == "map_reconcile"

    drain(module)

    done = (await client.get(f"/imports/{created['id']}", headers=as_a)).json()
    assert done["status"] == "done"
    # /a's page was known: mapped as it was inserted
    assert done["counts"] == {"read": 3, "inserted": 2, "skipped": 0, "errors": 1, "mapped": 1}
    assert done["error_samples"] == [
        {"line": 4, "reason": "clicks is not a whole number: not-a-number"}
    ]
    assert done["job"]["status"] == "done"
    assert done["job"]["progress"]["done"] == 3

    # /b's page arrives after the import: its reconcile maps the row
    later = await client.post(
        f"/site-targets/{target['id']}/pages",
        json={"urls": ["https://www.example.com/b/"]},
        headers=as_a,
    )
    assert later.json()["added"] == 1
    drain(module)

    listing = await client.get("/imports", params={"site_target_id": target["id"]}, headers=as_a)
    assert listing.status_code == 200
    body = listing.json()
    assert [item["id"] for item in body["imports"]] == [created["id"]]
    events = body["reconcile_events"]
    assert [(event["status"], event["mapped"]) for event in events] == [("done", 1), ("done", 0)]
    assert events[0]["job_id"] == later.json()["reconcile_job"]["id"]
    assert events[1]["job_id"] == loaded["reconcile_job"]["id"]  # the import joined it

    # the reconcile events are history: deleting one over HTTP is refused
    deleted = await client.delete(f"/jobs/{events[0]['job_id']}", headers=as_a)
    assert deleted.status_code == 409
    assert "never deleted" in deleted.json()["detail"]


async def test_an_import_that_fails_reads_failed_with_its_error(
    client: httpx.AsyncClient, module: ImportsModule, as_a: dict[str, str]
) -> None:
    target = await _target(client, as_a)
    response = await _upload(client, as_a, target["id"], b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    assert response.status_code == 202
    drain(module)
    failed = (await client.get(f"/imports/{response.json()['id']}", headers=as_a)).json()
    assert failed["status"] == "failed"
    assert "not a CSV file" in failed["error"]
    assert failed["job"]["status"] == "failed"


async def test_site_targets_are_validated_and_unique_per_org(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    await _target(client, as_a)
    again = await client.post(
        "/site-targets",
        json={"name": "Again", "base_url": "https://WWW.example.com/"},
        headers=as_a,
    )
    assert again.status_code == 409
    await _target(client, as_b)  # another org may have the same site
    bad = await client.post(
        "/site-targets", json={"name": "Bad", "base_url": "ftp://example.com"}, headers=as_a
    )
    assert bad.status_code == 422
    assert "unsupported scheme" in bad.json()["detail"]
    listed = (await client.get("/site-targets", headers=as_a)).json()
    assert [target["name"] for target in listed] == ["Example"]


async def test_another_orgs_targets_and_imports_look_absent(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    target = await _target(client, as_a)
    created = (await _upload(client, as_a, target["id"], CSV.encode())).json()
    absent = str(uuid.uuid4())

    def same_404s(responses: list[httpx.Response]) -> bytes:
        assert {r.status_code for r in responses} == {404}
        bodies = {r.content for r in responses}
        assert len(bodies) == 1, bodies
        return bodies.pop()

    import_bodies = [
        await client.get(f"/imports/{created['id']}", headers=as_b),
        await client.get(f"/imports/{absent}", headers=as_a),
        await client.get("/imports/not-a-uuid", headers=as_a),
    ]
    assert b"no such import" in same_404s(import_bodies)

    target_bodies = [
        await client.get(f"/site-targets/{target['id']}", headers=as_b),
        await client.get(f"/site-targets/{absent}", headers=as_a),
        await client.get("/imports", params={"site_target_id": target["id"]}, headers=as_b),
        await client.get("/imports", params={"site_target_id": absent}, headers=as_a),
        await client.post(
            f"/site-targets/{target['id']}/pages", json={"urls": ["/x"]}, headers=as_b
        ),
        await _upload(client, as_b, target["id"], CSV.encode()),
        await _upload(client, as_a, absent, CSV.encode()),
    ]
    assert b"no such site target" in same_404s(target_bodies)
    # and the foreign attempts changed nothing
    mine = await client.get("/imports", params={"site_target_id": target["id"]}, headers=as_a)
    assert len(mine.json()["imports"]) == 1
    assert (await client.get("/site-targets", headers=as_b)).json() == []


async def test_every_imports_route_needs_a_token(client: httpx.AsyncClient) -> None:
    some = str(uuid.uuid4())
    responses = [
        await client.post("/site-targets", json={"name": "x", "base_url": "x.com"}),
        await client.get("/site-targets"),
        await client.post(f"/site-targets/{some}/pages", json={"urls": ["/"]}),
        await client.get("/imports", params={"site_target_id": some}),
        await client.get(f"/imports/{some}"),
        await _upload(client, {}, some, b"x"),
    ]
    assert {r.status_code for r in responses} == {401}


async def test_an_upload_over_the_limit_is_a_413_and_stores_nothing(
    client: httpx.AsyncClient, as_a: dict[str, str], data_dir: Path
) -> None:
    target = await _target(client, as_a)
    over = HEADER.encode() + b"https://www.example.com/a,q,1,1,1%,1,2025-01-01\n" * 200
    assert len(over) > UPLOAD_LIMIT
    refused = await _upload(client, as_a, target["id"], over)
    assert refused.status_code == 413
    assert refused.headers["content-type"] == "application/problem+json"
    huge = await _upload(client, as_a, target["id"], b"x" * (UPLOAD_LIMIT + 2 * 1024 * 1024))
    assert huge.status_code == 413  # refused by the body limit before any parsing
    assert not list(data_dir.rglob("*.csv"))
    listing = await client.get("/imports", params={"site_target_id": target["id"]}, headers=as_a)
    assert listing.json()["imports"] == []
    # the body limit of the other routes is unchanged
    pages = await client.post(
        f"/site-targets/{target['id']}/pages",
        json={"urls": ["/" + "a" * 1000] * 2000},
        headers=as_a,
    )
    assert pages.status_code == 413


async def test_a_malformed_site_target_id_in_the_form_is_a_422(
    client: httpx.AsyncClient, as_a: dict[str, str]
) -> None:
    response = await _upload(client, as_a, "nope", CSV.encode())
    assert response.status_code == 422


async def test_without_the_module_or_on_the_memory_store_there_are_no_imports_routes(
    imports_engine: Engine, data_dir: Path, container: Container
) -> None:
    served = set(create_app(container).openapi()["paths"])
    assert {"/imports/csv", "/imports", "/imports/{import_id}", "/site-targets"} <= served
    cases = [
        build_container(ApiSettings(store="memory"), [], modules=[imports_module]),
        build_container(ApiSettings(store="postgres", data_dir=data_dir), []),
    ]
    for other in cases:
        other.engine.override(providers.Object(imports_engine))
        paths = set(create_app(other).openapi()["paths"])
        assert "/imports/csv" not in paths
        assert "/jobs" in paths


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
    target = await _target(client, as_a)
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
    target = await _target(client, as_a)
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
    target = await _target(client, as_a)
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
            headers=_headers(container, ORG),
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
