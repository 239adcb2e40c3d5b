"""The Imports routes over HTTP (httpx against the API app, the real container on PostgreSQL).

The app is the API's own (``create_app``) with the container the deployable builds
(``build_container(..., modules=[the Imports module declaration])``); tests only override the
engine (the test database) and the clock, and run the queued jobs in process with the module
built on the same engine, data directory and clock.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from dependency_injector import providers
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_imports.module import module as imports_module

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
from tests.imports.helpers import HEADER, drain

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_upload_import_read_back_with_counts_and_reconcile_events(
    client: httpx.AsyncClient, module: ImportsModule, as_a: dict[str, str], data_dir: Path
) -> None:
    target = await new_target(client, as_a)
    assert target["base_url"] == "https://www.example.com/"

    response = await upload_csv(client, as_a, target["id"], CSV.encode(), "../../secret.csv")
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


async def test_the_same_export_uploaded_again_is_a_200_with_its_import(
    client: httpx.AsyncClient, module: ImportsModule, as_a: dict[str, str]
) -> None:
    target = await new_target(client, as_a)
    first = await upload_csv(client, as_a, target["id"], CSV.encode())
    assert first.status_code == 202
    drain(module)
    again = await upload_csv(client, as_a, target["id"], CSV.encode(), "renamed.csv")
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["status"] == "done"
    assert again.headers["Location"] == f"/imports/{first.json()['id']}"
    forced = await upload_csv(client, as_a, target["id"], CSV.encode(), force=True)
    assert forced.status_code == 202
    assert forced.json()["id"] != first.json()["id"]
    listed = (await client.get(f"/imports?site_target_id={target['id']}", headers=as_a)).json()
    assert len(listed["imports"]) == 2


async def test_an_import_that_fails_reads_failed_with_its_error(
    client: httpx.AsyncClient, module: ImportsModule, as_a: dict[str, str]
) -> None:
    target = await new_target(client, as_a)
    response = await upload_csv(client, as_a, target["id"], b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    assert response.status_code == 202
    drain(module)
    failed = (await client.get(f"/imports/{response.json()['id']}", headers=as_a)).json()
    assert failed["status"] == "failed"
    assert "not a CSV file" in failed["error"]
    assert failed["job"]["status"] == "failed"


async def test_site_targets_are_validated_and_unique_per_org(
    client: httpx.AsyncClient, as_a: dict[str, str], as_b: dict[str, str]
) -> None:
    await new_target(client, as_a)
    again = await client.post(
        "/site-targets",
        json={"name": "Again", "base_url": "https://WWW.example.com/"},
        headers=as_a,
    )
    assert again.status_code == 409
    await new_target(client, as_b)  # another org may have the same site
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
    target = await new_target(client, as_a)
    created = (await upload_csv(client, as_a, target["id"], CSV.encode())).json()
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
        await upload_csv(client, as_b, target["id"], CSV.encode()),
        await upload_csv(client, as_a, absent, CSV.encode()),
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
        await upload_csv(client, {}, some, b"x"),
    ]
    assert {r.status_code for r in responses} == {401}


async def test_an_upload_over_the_limit_is_a_413_and_stores_nothing(
    client: httpx.AsyncClient, as_a: dict[str, str], data_dir: Path
) -> None:
    target = await new_target(client, as_a)
    over = HEADER.encode() + b"https://www.example.com/a,q,1,1,1%,1,2025-01-01\n" * 200
    assert len(over) > UPLOAD_LIMIT
    refused = await upload_csv(client, as_a, target["id"], over)
    assert refused.status_code == 413
    assert refused.headers["content-type"] == "application/problem+json"
    huge = await upload_csv(client, as_a, target["id"], b"x" * (UPLOAD_LIMIT + 2 * 1024 * 1024))
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
    response = await upload_csv(client, as_a, "nope", CSV.encode())
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
