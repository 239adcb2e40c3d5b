"""The Overview, search, deep links and bulk actions in headless Chromium against a real API and
worker (issue 24, item 4): per-type cards with their charts whose counts lead to the filtered
jobs, a job found by the short id the table shows (or its candidates), ``/?job=<id>`` opening
its detail (through the sign-in page too), and a bulk action that says how many jobs it will
change and skip before it changes anything. At 390x844, 1280x800 and 1920x1080, light and dark,
the Overview and the bulk bar hold inside the viewport (``overview-<w>x<h>-<scheme>.png`` in
``JOBS_SCREENSHOT_DIR``)."""

from __future__ import annotations

import re
import urllib.error
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.browser.helpers import (
    System,
    inside,
    no_horizontal_overflow,
    screenshot_dir,
    sign_in,
)
from tests.cli.helpers import wait_until as wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-b"),  # one system for the group (conftest)
]


def finished(system: System, org: str, count: int, type_: str = "noop") -> list[str]:
    """``count`` jobs of ``type_`` enqueued and ended (done, or failed for ``fail``)."""
    payload = {"message": "CSV row 18: 'clicks' is not a number"} if type_ == "fail" else {}
    ids = [system.enqueue(org, type_, payload) for _ in range(count)]
    for job_id in ids:
        system.wait_status(org, job_id, "done", "failed")
    return ids


def test_the_overview_counts_and_charts_each_type_and_leads_to_its_jobs(
    panel: Page, system: System, org: str
) -> None:
    finished(system, org, 2)
    [failed] = finished(system, org, 1, "fail")
    panel.get_by_role("link", name="Overview").click()
    expect(panel).to_have_url(re.compile(r"\?view=overview$"))
    view = panel.locator("#overview-view")
    expect(view).to_have_attribute("data-loaded", "true")
    noop = view.locator(".type-card[data-type='noop']")
    expect(noop.locator("[data-status='done'] .n")).to_have_text("2")
    expect(noop.locator(".total")).to_have_text("2 jobs")
    # A bar for the minute the jobs finished in, that says its figures on hover.
    expect(noop.locator("svg.chart-finished g title")).to_contain_text(["2 done, 0 failed"])
    expect(noop.locator("svg.chart-latency path.line-p50").first).to_be_attached()
    card = view.locator(".type-card[data-type='fail']")
    expect(card.locator(".failed-note")).to_have_text("1 failed")
    expect(view.locator("#overview-workers")).to_be_hidden()  # a tenant sees no workers
    expect(view.locator("#overview-usage")).to_contain_text("Queued jobs")
    panel.get_by_role("button", name="Last day").click()
    expect(panel).to_have_url(re.compile(r"window=day"))
    expect(noop.locator("[data-status='done'] .n")).to_have_text("2")
    # The failed count leads to the failed jobs of the type.
    card.locator("[data-status='failed']").click()
    expect(panel).to_have_url(re.compile(r"status=failed&type=fail$"))
    expect(panel.locator("#jobs-view")).to_be_visible()
    expect(panel.locator("#rows tr")).to_have_count(1)
    expect(panel.locator(f"tr[data-id='{failed}']")).to_be_visible()
    # Back in the Overview, it follows that filter until "Show all"; a type's name leads to
    # all its jobs.
    panel.get_by_role("link", name="Overview").click()
    expect(panel.locator("#overview-filter-text")).to_have_text("Counting status failed, type fail")
    expect(panel.locator(".type-card")).to_have_count(1)
    panel.get_by_role("button", name="Show all").click()
    expect(panel.locator(".type-card")).to_have_count(2)
    panel.get_by_role("button", name="noop: show its jobs").click()
    expect(panel).to_have_url(re.compile(r"\?type=noop$"))
    expect(panel.locator("#rows tr")).to_have_count(2)


def test_a_deep_link_opens_the_detail_and_closing_it_leaves_the_address(
    context: BrowserContext, system: System, org: str
) -> None:
    [job_id] = finished(system, org, 1)
    page = context.new_page()
    page.goto(f"{system.base}/?job={job_id}")  # signed out: the link survives the sign-in
    page.wait_for_url(re.compile(r"/signin\?next="))
    page.get_by_label("API token").fill(system.token(org))
    page.get_by_role("button", name="Sign in").click()
    detail = page.locator("#detail")
    expect(detail).to_be_visible()
    expect(page.locator("#detail-title")).to_contain_text(job_id)
    assert f"job={job_id}" in page.url
    page.locator("#detail-close").click()
    expect(detail).to_be_hidden()
    expect(page).to_have_url(f"{system.base}/")
    # Another org's job, or no job at all, is not found and said so.
    foreign = system.enqueue(f"{org}-other", "noop")
    for missing in (foreign, str(uuid.uuid4())):
        page.goto(f"{system.base}/?job={missing}")
        expect(page.locator("#toasts")).to_contain_text(f"No job {missing} in this org")
        expect(detail).to_be_hidden()


def test_search_finds_a_job_by_the_short_id_shown_or_lists_the_candidates(
    panel: Page, system: System, org: str
) -> None:
    ids = finished(system, org, 3)
    job_id = ids[1]
    short = panel.locator(f"tr[data-id='{job_id}'] td.type .id").inner_text()
    assert job_id.endswith(short)
    box = panel.get_by_role("searchbox", name="Find a job by its id")
    box.fill(short)
    box.press("Enter")
    expect(panel.locator("#detail")).to_be_visible()
    expect(panel.locator("#detail-title")).to_contain_text(job_id)
    panel.locator("#detail-close").click()
    # The first 8 digits are a UUIDv7's creation time: the three jobs share them.
    prefix = uuid.UUID(job_id).hex[:8]
    assert all(uuid.UUID(i).hex.startswith(prefix) for i in ids)
    panel.keyboard.press("/")  # the shortcut to the box
    expect(box).to_be_focused()
    box.fill(prefix)
    box.press("Enter")
    expect(panel.locator(".search-message")).to_contain_text("3 jobs match")
    candidates = panel.locator(".search-candidates button")
    expect(candidates).to_have_count(3)
    candidates.nth(0).click()
    expect(panel.locator("#detail")).to_be_visible()
    panel.locator("#detail-close").click()
    box.fill("not-an-id")
    box.press("Enter")
    expect(panel.locator(".search-message")).to_contain_text("is not a job id")
    expect(box).to_have_attribute("aria-invalid", "true")


def test_a_bulk_delete_says_how_many_it_changes_and_skips_before_it_does(
    panel: Page, system: System, org: str
) -> None:
    done = finished(system, org, 2)
    running = system.enqueue(org, "sleep", {"seconds": 60})
    system.wait_status(org, running, "running")
    for job_id in (*done, running):
        expect(panel.locator(f"tr[data-id='{job_id}']")).to_be_visible()
        panel.locator(f"tr[data-id='{job_id}'] input.pick").check()
    bar = panel.get_by_role("region", name="Bulk actions")
    expect(bar.locator("#bulk-count")).to_have_text("3 jobs selected")
    bar.get_by_role("button", name="Delete", exact=True).click()
    dialog = panel.locator("#bulk-confirm")
    expect(dialog).to_be_visible()
    expect(panel.locator("#bulk-title")).to_have_text("Delete 2 jobs?")
    expect(panel.locator("#bulk-skips")).to_contain_text(
        "1 job will be skipped: it has not finished"
    )
    # Nothing changed by the count.
    assert system.job(org, done[0])["status"] == "done"
    panel.locator("#bulk-keep").click()
    expect(dialog).to_be_hidden()
    assert system.job(org, done[0])["status"] == "done"
    bar.get_by_role("button", name="Delete", exact=True).click()
    panel.get_by_role("button", name="Delete 2 jobs").click()
    expect(panel.locator("#toasts")).to_contain_text("2 jobs deleted; 1 skipped")
    for job_id in done:
        expect(panel.locator(f"tr[data-id='{job_id}']")).to_have_count(0)
        with pytest.raises(urllib.error.HTTPError) as gone:
            system.job(org, job_id)
        assert gone.value.code == 404
    assert system.job(org, running)["status"] == "running"
    expect(bar).to_be_hidden()


def test_a_bulk_retry_of_every_job_matching_the_filter_beyond_the_page(
    panel: Page, system: System, org: str
) -> None:
    """55 failed jobs, 50 shown: ticking the shown ones offers all 55, and the retry counts
    and acts on all 55."""
    failed = finished(system, org, 55, "fail")
    panel.locator("[data-filter='failed']").click()
    expect(panel.locator("#rows tr")).to_have_count(50)
    panel.locator("#select-all").check()
    bar = panel.get_by_role("region", name="Bulk actions")
    expect(bar.locator("#bulk-count")).to_have_text("50 jobs selected")
    bar.get_by_role("button", name="Select all 55 jobs matching the filter").click()
    expect(bar.locator("#bulk-count")).to_have_text("All 55 jobs matching the filter")
    bar.get_by_role("button", name="Retry", exact=True).click()
    expect(panel.locator("#bulk-title")).to_have_text("Retry 55 jobs?")
    panel.get_by_role("button", name="Retry 55 jobs").click()
    expect(panel.locator("#toasts")).to_contain_text("55 jobs retried")
    for job_id in failed:  # each ran once more (and failed again: the type always fails)
        wait_for(f"the second attempt of {job_id}", _ran_twice(system, org, job_id), timeout=60)


def _ran_twice(system: System, org: str, job_id: str) -> Callable[[], bool]:
    """Whether the job ended a second attempt (its retry ran)."""

    def probe() -> bool:
        job = system.job(org, job_id)
        return job["status"] == "failed" and len(job["attempt_history"]) == 2

    return probe


@pytest.fixture(scope="module")
def busy_org(system: System) -> Iterator[dict[str, Any]]:
    """An org with finished jobs of two types and a running one, for the layout."""
    org = "overview-layout"
    ids = finished(system, org, 3) + finished(system, org, 2, "fail")
    running = system.enqueue(org, "sleep", {"seconds": 300})
    system.wait_status(org, running, "running")
    yield {"org": org, "ids": ids}
    system.cancel_active(org)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["390x844", "1280x800", "1920x1080"])
def test_the_overview_and_the_bulk_bar_hold_at_every_size(
    browser: Browser, system: System, busy_org: dict[str, Any], size: str, scheme: str
) -> None:
    width, height = (int(n) for n in size.split("x"))
    context = browser.new_context(
        viewport={"width": width, "height": height},
        color_scheme=scheme,  # type: ignore[arg-type]
        reduced_motion="reduce",
    )
    try:
        page = context.new_page()
        sign_in(page, system, busy_org["org"])
        page.get_by_role("link", name="Overview").click()
        expect(page.locator("#overview-view")).to_have_attribute("data-loaded", "true")
        expect(page.locator(".type-card")).to_have_count(3)
        no_horizontal_overflow(page)
        for card in page.locator(".type-card").all():
            box = card.bounding_box()
            assert box is not None
            assert box["x"] >= 0
            assert box["x"] + box["width"] <= width + 0.5
        inside(page, page.get_by_role("button", name="Refresh"))
        inside(page, page.get_by_role("searchbox", name="Find a job by its id"))
        page.screenshot(path=str(screenshot_dir() / f"overview-{size}-{scheme}.png"))
        page.get_by_role("link", name="Jobs", exact=True).click()
        page.locator("#select-all").check()
        bar = page.get_by_role("region", name="Bulk actions")
        for name in ("Retry", "Cancel", "Delete", "Clear"):
            inside(page, bar.get_by_role("button", name=name, exact=True))
        no_horizontal_overflow(page)
    finally:
        context.close()
