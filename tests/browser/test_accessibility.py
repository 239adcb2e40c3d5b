"""Accessibility of the panel, checked by axe-core (the ``axe-playwright-python`` package runs
it in the page) in light and dark mode: names and roles of every control, labels of every
field, contrast of every text against its background, with the dialogs open too, the bulk bar
and its confirmation, the search's answer and the Overview."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.helpers import System, new_context, sign_in

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-c"),  # one system for the group (conftest)
]


def violations(page: Page) -> list[str]:
    """axe's violations on the page as it is now, one readable line each."""
    results: Any = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
        for v in results.response["violations"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_accessibility_violation_on_the_pages_and_dialogs(
    browser: Browser, system: System, org: str, scheme: str
) -> None:
    done = system.enqueue(org, "noop", {"site_id": "shop.example"})
    failed = system.enqueue(org, "fail", {"message": "the site answered 503"})
    system.wait_status(org, done, "done")
    system.wait_status(org, failed, "failed")
    cancelled = system.enqueue(org, "sleep", {"seconds": 60})
    system.call("POST", f"/jobs/{cancelled}/cancel", org)
    running = system.enqueue(org, "sleep", {"seconds": 60})
    system.enqueue(org, "sleep", {"seconds": 60})  # a second slot busy: see conftest
    system.enqueue(org, "noop")
    system.wait_status(org, running, "running")

    context = new_context(browser, scheme)
    try:
        page = context.new_page()
        page.goto(f"{system.base}/signin")
        assert violations(page) == []

        sign_in(page, system, org)
        expect(page.locator("#rows tr")).to_have_count(6)
        page.locator(f"tr[data-id='{failed}'] details.error summary").click()
        assert violations(page) == []

        page.get_by_role("button", name="New job").click()
        page.locator("#enqueue-type").select_option("sleep")
        page.get_by_label("Seconds").fill("-1")
        page.get_by_role("button", name="Enqueue").click()
        expect(page.locator("#enqueue .field-error").first).not_to_be_empty()
        assert violations(page) == []
        page.keyboard.press("Escape")

        page.locator(f"tr[data-id='{failed}'] button[data-action='details']").click()
        expect(page.locator("#detail")).to_be_visible()
        assert violations(page) == []
        page.keyboard.press("Escape")

        page.locator(f"tr[data-id='{done}'] button[data-action='delete']").click()
        expect(page.locator("#confirm")).to_be_visible()
        assert violations(page) == []
        page.keyboard.press("Escape")

        # The bulk bar and its confirmation, the search's candidates, the Overview.
        page.locator("#select-all").check()
        expect(page.locator("#bulk-bar")).to_be_visible()
        assert violations(page) == []
        page.locator("#bulk-bar [data-bulk='delete']").click()
        expect(page.locator("#bulk-confirm")).to_be_visible()
        assert violations(page) == []
        page.keyboard.press("Escape")
        page.get_by_role("searchbox", name="Find a job by its id").fill(done[:8])
        page.keyboard.press("Enter")
        expect(page.locator(".search-results")).to_be_visible()
        assert violations(page) == []
        page.keyboard.press("Escape")
        page.get_by_role("link", name="Overview").click()
        expect(page.locator("#overview-view")).to_have_attribute("data-loaded", "true")
        expect(page.locator(".type-card")).to_have_count(3)
        assert violations(page) == []
    finally:
        context.close()
