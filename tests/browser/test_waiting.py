"""What a queued job waits for, in the panel (issue 24, item 4): a job whose ``run_at`` is
ahead shows "scheduled" and when it runs, a priority other than the default is shown, and the
detail lists the reasons the API gives (``waiting``, read by GET /jobs/{id}). The priority comes
from the list and the detail: the event log keeps none (an event's job shows the default)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from jobs_core import NewJob
from playwright.sync_api import BrowserContext, expect

from tests.browser.helpers import System, screenshot_dir, sign_in

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-b"),  # one system for the group (conftest)
]


def test_a_scheduled_job_says_when_it_runs_and_why_it_waits(
    context: BrowserContext, system: System, org: str
) -> None:
    later = datetime.now(UTC) + timedelta(hours=2)
    # inserted by the store in this process (two `jobs enqueue` processes cost seconds of start-up)
    jobs = system.insert([NewJob(org, "noop", run_at=later, priority=5), NewJob(org, "noop")])
    scheduled, plain = (str(job.id) for job in jobs)
    # Read by the list (GET /jobs): the event log keeps no priority, the list does.
    panel = context.new_page()
    sign_in(panel, system, org)
    row = panel.locator(f"tr[data-id='{scheduled}']")
    expect(row.locator(".badge")).to_have_text("scheduled")
    expect(row.locator(".eta")).to_have_text(re.compile(r"^in (1 h 5\d|2 h 0) min$"))
    expect(row.locator(".prio")).to_have_text("P5")
    # A job of the default priority shows none; once done, no "when" either.
    expect(panel.locator(f"tr[data-id='{plain}'] .badge")).to_have_text("done", timeout=30_000)
    expect(panel.locator(f"tr[data-id='{plain}'] .prio")).to_have_count(0)
    expect(panel.locator(f"tr[data-id='{plain}'] .eta")).to_have_count(0)

    row.locator("button[data-action='details']").click()
    detail = panel.locator("#detail")
    expect(detail.locator("#detail-status")).to_contain_text("priority 5")
    expect(detail.locator("#detail-status")).to_contain_text("runs in ")
    reason = detail.locator("#detail-waiting li[data-code='scheduled']")
    expect(reason).to_contain_text("scheduled for later")


def test_a_batch_callback_waits_for_its_members_then_runs(
    context: BrowserContext, system: System, org: str
) -> None:
    """A batch of sleeps and its callback through a real API and worker: the callback shows
    "waiting" and why while a member runs, then runs once every member has ended (the worker's
    release pass, decision 0041)."""
    system.call("POST", "/jobs", org, {"type": "noop"})  # the org exists before the sign-in
    panel = context.new_page()
    sign_in(panel, system, org)
    batch = system.call(
        "POST",
        "/batches",
        org,
        {
            "jobs": [{"type": "sleep", "payload": {"seconds": 3}}, {"type": "noop"}],
            "callback": {"type": "noop", "payload": {}},
        },
    )
    callback = batch["callback"]["id"]
    row = panel.locator(f"tr[data-id='{callback}']")
    expect(row.locator(".badge")).to_have_text("waiting")
    expect(row.locator("button[data-action='cancel']")).to_be_visible()  # cancellable as queued
    row.locator("button[data-action='details']").click()
    detail = panel.locator("#detail")
    expect(detail.locator("#detail-waiting li[data-code='awaiting']")).to_contain_text(
        "waits for other jobs to end"
    )
    # The batch's progress, and each member a link to its own detail (decision 0043).
    expect(detail.locator("#detail-awaited-summary")).to_contain_text("of 2 ended")
    expect(detail.locator("#detail-awaited li")).to_have_count(2)
    expect(detail.locator("#detail-status .badge")).to_have_text("done", timeout=60_000)
    expect(detail.locator("#detail-awaited-summary")).to_have_text("2 of 2 ended · 2 done")
    for width, height in ((390, 844), (1280, 800), (1920, 1080)):  # looked at by a person
        panel.set_viewport_size({"width": width, "height": height})
        detail.locator("#detail-awaited-section").scroll_into_view_if_needed()
        panel.screenshot(path=str(screenshot_dir() / f"awaited-{width}x{height}.png"))
    member = batch["members"][0]
    detail.locator(f"#detail-awaited li[data-id='{member}'] a").click()
    expect(detail.locator("#detail-title")).to_contain_text(member)
    expect(detail.locator("#detail-awaited-section")).to_be_hidden()  # a member awaits none
    awaited = system.call("GET", f"/jobs/{callback}/awaited", org)
    assert (awaited["ended"], awaited["total"], awaited["counts"]["done"]) == (2, 2, 2)
