"""The picture of the panel the README shows: jobs in every status, light and dark.

Saved under ``JOBS_SCREENSHOT_DIR`` (default ``.data/screenshots``, git-ignored) as
``panel.png`` and ``panel-dark.png``; ``JOBS_SCREENSHOT_DIR=docs/img uv run pytest
tests/browser/test_screenshot.py`` refreshes the committed ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.helpers import System, new_context, screenshot_dir, sign_in

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-a"),  # one system for the group (conftest)
]


@pytest.fixture
def org(system: System) -> Iterator[str]:
    """A readable org name for the picture (no other module of its group names it)."""
    yield "acme"
    system.cancel_active("acme")


def test_screenshot_of_the_panel_with_jobs_in_every_status(
    browser: Browser, system: System, org: str
) -> None:
    ids = {
        "done": system.enqueue(org, "noop", {"file_name": "/imports/gsc-2026-11.csv"}),
        "failed": system.enqueue(
            org, "fail", {"message": "CSV row 18: 'clicks' is not a number ('12,5')"}
        ),
    }
    system.wait_status(org, ids["done"], "done")
    system.wait_status(org, ids["failed"], "failed")
    cancelled = system.enqueue(org, "sleep", {"seconds": 60})
    system.call("POST", f"/jobs/{cancelled}/cancel", org)
    system.wait_status(org, cancelled, "cancelled")
    running = [system.enqueue(org, "sleep", {"seconds": s}) for s in (40, 25)]
    # Queued behind the two running sleeps (the worker has two slots); the org fixture cancels
    # what is still active after the test.
    for payload in ({"seconds": 30}, {"seconds": 45}):
        system.enqueue(org, "sleep", payload)
    for job_id in running:
        system.wait_status(org, job_id, "running")
    shots = {}
    for scheme in ("light", "dark"):
        context = new_context(browser, scheme)
        try:
            page = context.new_page()
            sign_in(page, system, org)
            expect(page.locator("#rows tr")).to_have_count(7)
            for status in ("queued", "running", "done", "failed", "cancelled"):
                expect(page.locator(f"#rows tr[data-status='{status}']").first).to_be_visible()
            # A bar well on its way, so the picture shows one.
            expect(
                page.locator(f"tr[data-id='{running[1]}'] [role=progressbar]")
            ).to_have_attribute("aria-valuenow", re.compile(r"^([2-9]\d|100)$"), timeout=30_000)
            page.locator(f"tr[data-id='{ids['failed']}'] details.error summary").click()
            name = "panel.png" if scheme == "light" else "panel-dark.png"
            path = screenshot_dir() / name
            box = page.locator("#jobs-view .table-wrap").bounding_box()
            assert box is not None
            clip = {"x": 0, "y": 0, "width": 1400, "height": box["y"] + box["height"] + 20}
            page.screenshot(path=str(path), clip=clip)  # type: ignore[arg-type]
            shots[scheme] = path
        finally:
            context.close()
    for path in shots.values():
        assert path.stat().st_size > 10_000
        print(f"saved {path}")


def test_screenshot_of_the_overview_with_a_day_of_history(browser: Browser, system: System) -> None:
    """``overview.png`` and ``overview-dark.png``: the Overview of an org with a day of finished
    jobs (filled in SQL by ``bench/overview_reads.py``) and a few run by the worker now."""
    from jobs_postgres.database import create_engine

    from bench.overview_reads import TYPES, fill

    org = "acme-overview"
    engine = create_engine(system.url)
    try:
        fill(engine, org, 20_000, hours=24)
    finally:
        engine.dispose()
    for job_id in [system.enqueue(org, "noop") for _ in range(3)]:
        system.wait_status(org, job_id, "done")
    running = system.enqueue(org, "sleep", {"seconds": 120})
    system.wait_status(org, running, "running")
    shots = {}
    try:
        for scheme in ("light", "dark"):
            context = new_context(browser, scheme)
            try:
                page = context.new_page()
                sign_in(page, system, org)
                page.goto(f"{system.base}/?view=overview")
                expect(page.locator("#overview-view")).to_have_attribute("data-loaded", "true")
                expect(page.locator(".type-card")).to_have_count(len(TYPES) + 2)
                name = "overview.png" if scheme == "light" else "overview-dark.png"
                path = screenshot_dir() / name
                page.screenshot(path=str(path), full_page=True)
                shots[scheme] = path
            finally:
                context.close()
    finally:
        system.cancel_active(org)
    for path in shots.values():
        assert path.stat().st_size > 10_000
        print(f"saved {path}")
