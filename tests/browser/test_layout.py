"""The panel's layout from a phone to a wide screen (issue 24, item 6): at 390x844, 1280x800 and
1920x1080, light and dark, every action button lies inside the viewport, the document is never
wider than the viewport, the dialogs open on-screen, and a 1080 px-high screen shows at least 20
rows. Each case saves a picture (``layout-<w>x<h>-<scheme>.png`` in ``JOBS_SCREENSHOT_DIR``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.helpers import System, inside, no_horizontal_overflow, screenshot_dir, sign_in

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-c"),  # one system for the group (conftest)
]

SIZES = ["390x844", "1280x800", "1920x1080"]
FINISHED_NOOPS = 22


@pytest.fixture(scope="module")
def layout_org(system: System) -> Iterator[dict[str, Any]]:
    """One org with jobs of every kind of action: done, failed, cancelled, running, queued."""
    org = "layout"
    noops = [
        system.enqueue(org, "noop", {"file_name": f"/imports/report-{n:02}.csv"})
        for n in range(FINISHED_NOOPS)
    ]
    failed = system.enqueue(org, "fail", {"message": "CSV row 18: 'clicks' is not a number"})
    for job_id in [*noops, failed]:
        system.wait_status(org, job_id, "done", "failed")
    cancelled = system.enqueue(org, "sleep", {"seconds": 60})
    system.call("POST", f"/jobs/{cancelled}/cancel", org)
    system.wait_status(org, cancelled, "cancelled")
    running = [system.enqueue(org, "sleep", {"seconds": 300}) for _ in range(2)]
    for job_id in running:
        system.wait_status(org, job_id, "running")
    queued = system.enqueue(org, "sleep", {"seconds": 30})
    yield {"org": org, "failed": failed, "total": FINISHED_NOOPS + 5, "queued": queued}
    system.cancel_active(org)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES)
def test_every_action_is_reachable_and_nothing_overflows(
    browser: Browser, system: System, layout_org: dict[str, Any], size: str, scheme: str
) -> None:
    width, height = (int(n) for n in size.split("x"))
    context = browser.new_context(
        viewport={"width": width, "height": height},
        color_scheme=scheme,  # type: ignore[arg-type]
        reduced_motion="reduce",
    )
    try:
        page = context.new_page()
        sign_in(page, system, layout_org["org"])
        rows = page.locator("#rows tr")
        expect(rows).to_have_count(layout_org["total"])
        expect(page.locator("#rows tr[data-status='running']")).to_have_count(2)
        no_horizontal_overflow(page)
        shot = screenshot_dir() / f"layout-{width}x{height}-{scheme}.png"
        page.screenshot(path=str(shot))
        if height >= 1080:
            # Compact rows: at least 20 whole rows on the first screen.
            bottoms = page.evaluate(
                """() => [...document.querySelectorAll('#rows tr')]
                     .filter((tr) => tr.getBoundingClientRect().bottom <= innerHeight).length"""
            )
            assert bottoms >= 20, bottoms
        for name in ("New job", "Sign out"):
            inside(page, page.get_by_role("button", name=name, exact=True))
        actions = page.locator("#rows button.action")
        kinds = set(actions.evaluate_all("(all) => all.map((b) => b.dataset.action)"))
        assert kinds == {"cancel", "retry", "delete", "details"}, kinds
        for index in range(actions.count()):
            inside(page, actions.nth(index))
        no_horizontal_overflow(page)

        # The dialogs open on-screen, their buttons reachable.
        failed = layout_org["failed"]
        # The detail is drawn from the row, then again from GET /jobs/{id}: checked after that.
        with page.expect_response(lambda r: r.url.endswith(f"/jobs/{failed}")):
            page.locator(f"tr[data-id='{failed}'] button[data-action='details']").click()
        detail = page.locator("#detail")
        expect(detail).to_be_visible()
        inside(page, detail.locator("#detail-close"))
        for button in detail.locator("#detail-actions button").all():
            inside(page, button)
        no_horizontal_overflow(page)
        page.screenshot(path=str(shot.with_name(f"{shot.stem}-detail.png")))
        page.keyboard.press("Escape")
        expect(detail).to_be_hidden()
        page.get_by_role("button", name="New job", exact=True).click()
        form = page.locator("#enqueue")
        expect(form).to_be_visible()
        inside(page, form.locator("#enqueue-cancel"))
        inside(page, form.locator("#enqueue-submit"))
        no_horizontal_overflow(page)
    finally:
        context.close()
