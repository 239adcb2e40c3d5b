"""A parent's row expands to its children, in the panel (issue 25, decision 0045): a real API
and worker run ``fanout`` (tests/browser/fanout_registry.py), whose handler enqueues 60 ``kid``
children and waits for them. Its row says how many have ended ("done/total"), a keyboard
operable disclosure (aria-expanded) shows them as indented rows, 50 then "Show 10 more", kept
live by the stream until all have ended; a child opens its own detail, and one deleted leaves
the group and the count."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import running_system
from tests.browser.helpers import System, new_context, screenshot_dir, sign_in

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CHILDREN = 60
"""More than a page of children (children.js reads 50 at a time)."""
FAILING = sum(1 for n in range(CHILDREN) if n % 10 == 7)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fanout_system(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """The API and a worker that also serve the fan-out types."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with running_system(
        pg_url,
        tmp_path_factory,
        JOBS_EXTRA_REGISTRIES="tests.browser.fanout_registry:registry",
        PYTHONPATH=path,  # the API and the worker import the registry from this checkout
    ) as built:
        yield built


def _shoot(page: Page, parent: str, name: str) -> None:
    """The parent's row at the top of the window and its children beneath, at three widths."""
    for width, height in ((1920, 1080), (1280, 800), (390, 844)):  # looked at by a person
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate(
            """id => {
              document.querySelector(`tr[data-id='${id}']`).scrollIntoView({block: "start"});
              const bar = document.querySelector(".topbar");
              const sticky = getComputedStyle(bar).position === "sticky";
              if (sticky) window.scrollBy(0, -bar.offsetHeight - 8);
            }""",
            parent,
        )
        page.screenshot(path=str(screenshot_dir() / f"{name}-{width}x{height}.png"))


def test_a_parent_row_expands_to_its_children_and_counts_those_ended(
    browser: Browser, fanout_system: System
) -> None:
    org = "web-kids"
    system = fanout_system
    system.call("POST", "/jobs", org, {"type": "kid", "payload": {"seconds": 0}})  # org exists
    context = new_context(browser)
    try:
        panel = context.new_page()
        sign_in(panel, system, org)
        parent = system.enqueue(org, "fanout", {"children": CHILDREN, "seconds": 0.25})
        row = panel.locator(f"tr[data-id='{parent}']")
        toggle = row.locator("button.kids")
        # The parent's first attempt wrote its children with its outcome (waiting): the panel
        # reads its counts on that event.
        expect(toggle).to_be_visible(timeout=30_000)
        expect(toggle).to_have_attribute("aria-expanded", "false")
        expect(toggle).to_contain_text(f"/{CHILDREN}")
        assert panel.locator("#jobs-table tr.child").count() == 0

        toggle.focus()
        panel.keyboard.press("Enter")  # a real button: the keyboard opens it
        expect(toggle).to_have_attribute("aria-expanded", "true")
        children = panel.locator(f"#jobs-table tr.child[data-parent='{parent}']")
        expect(children).to_have_count(50)
        # Indented rows right beneath the parent's, each with a status, a type and a progress.
        beneath = row.evaluate("r => r.nextElementSibling.dataset.parent")
        assert beneath == parent
        first = children.first
        expect(first.locator("td.type button.link")).to_have_text("kid")
        expect(first.locator("td.status .badge")).to_be_visible()
        expect(first.locator("td.progress-cell")).to_be_visible()
        more = panel.locator(f"#jobs-table tr.kids-foot[data-parent='{parent}'] button")
        expect(more).to_have_text("Show 10 more children")
        _shoot(panel, parent, "children-running")  # some running, some queued, some ended
        panel.set_viewport_size({"width": 1280, "height": 800})
        more.scroll_into_view_if_needed()
        panel.screenshot(path=str(screenshot_dir() / "children-more-1280x800.png"))
        more.click()
        expect(children).to_have_count(CHILDREN)
        expect(more).to_have_count(0)

        # Live: every child row ends, and the parent's count with them, without a reload.
        expect(toggle).to_contain_text(f"{CHILDREN}/{CHILDREN}", timeout=90_000)
        ended = panel.locator(
            f"#jobs-table tr.child[data-parent='{parent}']:is([data-status='done'], "
            "[data-status='failed'])"
        )
        expect(ended).to_have_count(CHILDREN, timeout=30_000)
        expect(
            panel.locator(f"#jobs-table tr.child[data-parent='{parent}'][data-status='failed']")
        ).to_have_count(FAILING)
        expect(row.locator(".badge")).to_have_text("done", timeout=30_000)  # ran again, once
        listed = system.call("GET", f"/jobs/{parent}", org)
        assert listed["children"] == {"total": CHILDREN, "ended": CHILDREN}
        _shoot(panel, parent, "children-ended")

        # A child opens its own detail, like any row.
        child_id = first.get_attribute("data-child-id")
        assert child_id is not None
        first.locator("td.type button.link").click()
        detail = panel.locator("#detail")
        expect(detail.locator("#detail-title")).to_contain_text(child_id[-8:])
        panel.keyboard.press("Escape")
        expect(detail).to_be_hidden()

        # A child deleted from its row leaves the group, and the parent's count follows.
        last = children.last
        last.locator("button[data-action='delete']").click()
        panel.locator("#confirm-delete").click()
        expect(children).to_have_count(CHILDREN - 1)
        expect(toggle).to_contain_text(f"{CHILDREN - 1}/{CHILDREN - 1}")

        # Space closes it again; the children leave, the parent stays.
        toggle.focus()
        panel.keyboard.press(" ")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        expect(children).to_have_count(0)
        expect(panel.locator("#jobs-table tr.kids-foot")).to_have_count(0)
    finally:
        context.close()


def test_the_children_look_right_in_the_dark(browser: Browser, fanout_system: System) -> None:
    org = "web-kids-dark"
    system = fanout_system
    system.call("POST", "/jobs", org, {"type": "kid", "payload": {"seconds": 0}})
    parent = system.enqueue(org, "fanout", {"children": 12, "seconds": 0.05})
    system.wait_status(org, parent, "done", timeout=60)
    context = new_context(browser, "dark")
    try:
        panel = context.new_page()
        sign_in(panel, system, org)
        toggle = panel.locator(f"tr[data-id='{parent}'] button.kids")
        expect(toggle).to_contain_text("12/12")
        toggle.click()
        expect(panel.locator(f"#jobs-table tr.child[data-parent='{parent}']")).to_have_count(12)
        expect(panel.locator("#jobs-table tr.kids-foot")).to_have_count(0)  # all shown
        _shoot(panel, parent, "children-dark")
    finally:
        context.close()
