"""The panel's files as the API serves them: pages, modules, security headers, revalidation.

What the panel does in a browser is tested in a real Chromium (``tests/browser``); this checks
the serving rules on the ASGI app, with no browser and no database.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from jobs_api.app import create_app
from jobs_api.containers import build_container
from jobs_api.panel import ASSETS, CONTENT_SECURITY_POLICY, load_assets
from jobs_api.settings import ApiSettings

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def web() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(build_container(ApiSettings(store="memory")))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://panel") as client:
        yield client


async def test_the_panel_is_served_at_the_root_with_a_strict_policy(
    web: httpx.AsyncClient,
) -> None:
    response = await web.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/panel/app.js">' in response.text
    signin = await web.get("/signin")
    assert signin.status_code == 200
    assert 'type="password"' in signin.text


async def test_every_module_a_page_imports_is_served_as_javascript(web: httpx.AsyncClient) -> None:
    # Follow the import graph from the pages' entry points: a missing or misnamed file would
    # break the panel only in a browser.
    pending = ["app.js", "signin.js"]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        response = await web.get(f"/panel/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"] == "text/javascript; charset=utf-8"
        pending += re.findall(r'from "\./([\w.-]+\.js)"', response.text)
    assert {
        "app.js",
        "api.js",
        "stream.js",
        "form.js",
        "format.js",
        "session.js",
        "schedules.js",
    } <= seen
    css = await web.get("/panel/panel.css")
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    assert "prefers-color-scheme: dark" in css.text


async def test_inline_scripts_and_styles_are_absent_from_the_pages() -> None:
    # The policy forbids them; one would silently not run.
    for name in ("index.html", "signin.html"):
        html = (ASSETS / name).read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), name
        assert "<style" not in html, name
        assert " style=" not in html, name
        assert not re.search(r"\son[a-z]+=", html), name


async def test_unknown_files_are_404_and_pages_are_not_served_as_assets(
    web: httpx.AsyncClient,
) -> None:
    for path in ("/panel/nope.js", "/panel/index.html", "/panel/..%2Fapp.py", "/panel/"):
        response = await web.get(path)
        assert response.status_code == 404, path


async def test_an_unchanged_file_is_revalidated_with_its_etag(web: httpx.AsyncClient) -> None:
    first = await web.get("/panel/app.js")
    assert first.headers["cache-control"] == "no-cache"
    etag = first.headers["etag"]
    again = await web.get("/panel/app.js", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert etag == load_assets()["app.js"].etag


async def test_the_panel_routes_stay_out_of_the_api_document(web: httpx.AsyncClient) -> None:
    paths = (await web.get("/openapi.json")).json()["paths"]
    assert "/" not in paths
    assert "/signin" not in paths
    assert not any(path.startswith("/panel") for path in paths)
