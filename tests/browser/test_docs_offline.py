"""``/docs`` and ``/redoc`` work without internet (issue 24, item 5): Swagger UI and ReDoc come
from the API itself (the files fastapi-offline installs), never from a CDN. The browser is
allowed no other host: a request elsewhere would be refused and recorded."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Route, expect

from tests.browser.helpers import System

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-a"),  # one system for the group (conftest)
]

EXTERNAL_URL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)


@pytest.mark.parametrize(
    ("path", "rendered"),
    [("/docs", ".swagger-ui .info .title"), ("/redoc", "redoc-wrap h1, .api-info h1")],
)
def test_the_api_docs_render_with_no_other_host(
    context: BrowserContext, system: System, path: str, rendered: str
) -> None:
    own = urlsplit(system.base).netloc
    elsewhere: list[str] = []

    def offline(route: Route) -> None:
        if urlsplit(route.request.url).netloc == own or route.request.url.startswith("data:"):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", offline)
    page = context.new_page()
    response = page.goto(f"{system.base}{path}")
    assert response is not None
    assert response.status == 200
    assert EXTERNAL_URL.search(response.text()) is None, response.text()
    expect(page.locator(rendered).first).to_contain_text("jobs", timeout=30_000)
    assert elsewhere == []
