"""The live light tells the truth while the database is away (issue 24, item 5): an API process
whose database link goes through a proxy the test severs, in front of the module's database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.api.server import ApiProcess
from tests.browser.helpers import System
from tests.postgres.proxy import LinkProxy

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-c"),  # one system for the group (conftest)
]


@pytest.fixture
def severable(system: System) -> Iterator[tuple[ApiProcess, LinkProxy]]:
    link = LinkProxy(system.url)
    api = ApiProcess(
        {"JOBS_DATABASE_URL": link.url, "JOBS_STORE": "postgres", "JOBS_API_TOKEN_CACHE_S": "1"},
        ("tests.api.helpers:registry",),
    )
    yield api, link
    api.stop()
    link.close()


def test_the_live_light_says_when_the_database_is_unreachable(
    context: BrowserContext,
    system: System,
    org: str,
    severable: tuple[ApiProcess, LinkProxy],
) -> None:
    api, link = severable
    page = context.new_page()
    page.goto(f"{api.base_url}/signin")
    page.get_by_label("API token").fill(system.token(org))
    page.get_by_role("button", name="Sign in").click()
    live = page.locator("#live")
    expect(live).to_have_attribute("data-state", "live", timeout=30_000)
    expect(live).to_have_text("Live")

    link.sever()
    expect(live).to_have_attribute("data-state", "unreachable", timeout=30_000)
    expect(live).to_have_text("Database unreachable")

    link.restore()
    expect(live).to_have_attribute("data-state", "live", timeout=60_000)
    expect(live).to_have_text("Live")
