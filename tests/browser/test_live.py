"""The panel's live behaviour beyond the happy paths of test_panel.py (issue 13, point 4): the
notification when a job started from this page ends (and only then), no polling loop, the
ticking duration, and the keyboard and screen-reader use of the main controls.

As in test_panel.py, every assertion waits for a condition with a deadline, and a test that
must not reload the page checks a mark it left on the window.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, Request, expect

from tests.browser.helpers import System, sign_in

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-b"),  # one system for the group (conftest)
]

# Records what the page asks of the browser's Notification API, and lets a test say the page is
# hidden (headless Chromium always reports a visible page, even behind another tab). The page's
# code runs unchanged: the real Notification is still constructed.
OBSERVE_NOTIFICATIONS = """
(() => {
  window.__notifications = [];
  window.__hidden = false;
  Object.defineProperty(Document.prototype, "hidden", {
    configurable: true, get() { return window.__hidden; },
  });
  const Real = window.Notification;
  if (!Real) return;
  class Observed extends Real {
    constructor(title, options) {
      super(title, options);
      window.__notifications.push({ title, body: options?.body, tag: options?.tag });
    }
  }
  Object.defineProperty(Observed, "permission", { get: () => Real.permission });
  Observed.requestPermission = (...args) => Real.requestPermission(...args);
  window.Notification = Observed;
})();
"""


def row(page: Page, job_id: str) -> Any:
    return page.locator(f"tr[data-id='{job_id}']")


def enqueue_from_form(page: Page, seconds: int) -> str:
    """Enqueue ``sleep`` from the form; the new job's id."""
    toasts = page.locator(".toast", has_text="Enqueued sleep")
    # An earlier one is removed (it may be expiring meanwhile), so the one to read is the only one.
    page.evaluate(
        """() => document.querySelectorAll("#toasts .toast").forEach(
             (node) => node.textContent.includes("Enqueued sleep") && node.remove())"""
    )
    page.get_by_role("button", name="New job").click()
    page.locator("#enqueue-type").select_option("sleep")
    page.get_by_label("Seconds").fill(str(seconds))
    page.get_by_role("button", name="Enqueue").click()
    expect(page.locator("#enqueue")).to_be_hidden()
    toast = toasts.first
    expect(toast).to_be_visible()
    short = re.search(r"Enqueued sleep (\w+)", toast.inner_text())
    assert short is not None
    job_id = page.locator(f"#rows tr .id[title$='{short.group(1)}']").get_attribute("title")
    assert job_id is not None
    return job_id


# ---- the notification ------------------------------------------------------------------------


def test_only_a_job_started_here_is_announced_when_it_ends(
    panel: Page, system: System, org: str
) -> None:
    # Two jobs end while the page watches: one enqueued elsewhere (the API), one from the form.
    elsewhere = system.enqueue(org, "noop", {"site_id": "elsewhere.example"})
    expect(row(panel, elsewhere).locator(".badge")).to_have_text("done", timeout=60_000)
    mine = enqueue_from_form(panel, 1)
    expect(row(panel, mine).locator(".badge")).to_have_text("done", timeout=60_000)
    announced = panel.locator(".toast", has_text="ended:")
    expect(announced).to_have_count(1)
    expect(announced).to_contain_text(f"sleep {mine[-8:]} ended: done")
    # A failure of another's job says nothing either.
    failed = system.enqueue(org, "fail", {"message": "not mine"})
    expect(row(panel, failed).locator(".badge")).to_have_text("failed", timeout=60_000)
    expect(announced).to_have_count(1)
    # The announcement's own action opens the job's details.
    announced.get_by_role("button", name="Details").click()
    expect(panel.locator("#detail")).to_be_visible()
    expect(panel.locator("#detail-title")).to_contain_text(mine)


def test_a_job_started_here_is_announced_after_a_reload_too(
    panel: Page, system: System, org: str
) -> None:
    # The page remembers what it started for the tab's life (sessionStorage), so a reload
    # between the enqueue and the end still announces it.
    mine = enqueue_from_form(panel, 3)
    panel.reload()
    panel.wait_for_selector("body[data-ready='true']")
    expect(row(panel, mine).locator(".badge")).to_have_text("done", timeout=60_000)
    expect(panel.locator(".toast", has_text=f"sleep {mine[-8:]} ended: done")).to_be_visible()


def test_a_hidden_page_with_permission_shows_a_system_notification(
    context: BrowserContext, system: System, org: str
) -> None:
    context.grant_permissions(["notifications"], origin=system.base)
    context.add_init_script(OBSERVE_NOTIFICATIONS)
    page = context.new_page()
    sign_in(page, system, org)
    # Permission already granted: the page does not offer to ask for it.
    expect(page.locator("#notify")).to_be_hidden()

    visible_end = enqueue_from_form(page, 1)
    expect(page.locator(".toast", has_text=f"{visible_end[-8:]} ended: done")).to_be_visible(
        timeout=60_000
    )
    assert page.evaluate("window.__notifications") == []  # seen on the page: a toast is enough

    page.evaluate("window.__hidden = true")  # the person looks at another tab
    hidden_end = enqueue_from_form(page, 1)
    system.wait_status(org, hidden_end, "done")
    expect(page.locator(".toast", has_text=f"{hidden_end[-8:]} ended: done")).to_be_visible(
        timeout=30_000
    )
    notes = page.evaluate("window.__notifications")
    assert notes == [
        {"title": "jobs", "body": f"sleep {hidden_end[-8:]} ended: done", "tag": hidden_end}
    ]


def test_without_permission_the_page_offers_to_ask_for_it(
    context: BrowserContext, system: System, org: str
) -> None:
    page = context.new_page()
    sign_in(page, system, org)
    assert page.evaluate("Notification.permission") == "default"
    expect(page.get_by_role("button", name="Enable notifications")).to_be_visible()


# ---- live by the stream only -----------------------------------------------------------------


def test_no_polling_the_clocks_tick_and_changes_arrive_by_the_stream_alone(
    panel: Page, system: System, org: str
) -> None:
    running = system.enqueue(org, "sleep", {"seconds": 60})
    line = row(panel, running)
    expect(line.locator(".badge")).to_have_text("running", timeout=60_000)
    # Let the burst of reads that follows a change (the counts) settle, then watch.
    panel.wait_for_timeout(1500)
    requests: list[str] = []

    def record(request: Request) -> None:
        requests.append(f"{request.method} {request.url}")

    panel.on("request", record)
    first = line.locator(".duration").inner_text()
    panel.wait_for_timeout(5000)
    second = line.locator(".duration").inner_text()
    age_text = line.locator(".age").inner_text()
    # The duration of a running job ticks with no request at all (the sleep's progress comes
    # by the stream, which is one long request opened before).
    assert first != second, f"the duration stayed at {first!r}"
    assert re.search(r"\d+ s", second), second
    assert age_text.endswith("ago")
    reads = [r for r in requests if "/jobs/stats" not in r]
    assert reads == [], f"the page asked for {reads} while nothing but progress changed"
    # The progress changes do re-read the counts, at most about twice a second.
    assert len(requests) <= 5 * 3, requests

    # A change made elsewhere arrives without the page asking for the list.
    requests.clear()
    system.call("POST", f"/jobs/{running}/cancel", org)
    expect(line.locator(".badge")).to_have_text("cancelled", timeout=30_000)
    assert not [r for r in requests if re.search(r"/jobs(\?|$)", r)], requests


# ---- keyboard and screen readers -------------------------------------------------------------


def test_keyboard_alone_filters_opens_details_and_gets_focus_back(
    panel: Page, system: System, org: str
) -> None:
    done = system.enqueue(org, "noop", {"site_id": "keys.example"})
    failed = system.enqueue(org, "fail", {"message": "keyboard"})
    system.wait_status(org, done, "done")
    system.wait_status(org, failed, "failed")
    expect(panel.locator("#rows tr")).to_have_count(2)

    # The first Tab reaches the skip link, which takes the focus to the table.
    panel.locator("body").focus()
    panel.keyboard.press("Tab")
    skip = panel.get_by_role("link", name="Skip to the jobs")
    expect(skip).to_be_focused()
    panel.keyboard.press("Enter")
    expect(panel.locator("#jobs-table")).to_be_focused()

    # The status filters are toggle buttons in a named group; Space presses one.
    group = panel.get_by_role("group", name="Show jobs by status")
    failed_filter = group.get_by_role("button", name=re.compile("^Failed"))
    failed_filter.focus()
    panel.keyboard.press("Space")
    expect(failed_filter).to_have_attribute("aria-pressed", "true")
    expect(group.get_by_role("button", name=re.compile("^All"))).to_have_attribute(
        "aria-pressed", "false"
    )
    expect(panel.locator("#rows tr")).to_have_count(1)

    # Tab moves on from the filters to the row's controls; Enter opens the details.
    opener = panel.get_by_role("button", name=re.compile(r"^fail \w+: open details$"))
    for _ in range(20):
        panel.keyboard.press("Tab")
        if opener.evaluate("node => node === document.activeElement"):
            break
    expect(opener).to_be_focused()
    panel.keyboard.press("Enter")
    dialog = panel.get_by_role("dialog", name=re.compile(f"fail · {failed}"))
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading", name="Timeline")).to_be_visible()
    expect(dialog.get_by_role("button", name=re.compile("^Retry fail"))).to_be_visible()
    # A modal dialog makes the page behind it inert: Tab cycles through the dialog's controls
    # (and the browser's own), never to a control of the page behind. Escape closes it and
    # gives the focus back to the control that opened it.
    for _ in range(10):
        panel.keyboard.press("Tab")
        assert dialog.evaluate(
            "node => node.contains(document.activeElement)"
            " || document.activeElement === document.body"
        ), panel.evaluate("document.activeElement.outerHTML")
    panel.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()

    # The header badge is a link named with its counts; Enter shows the active jobs.
    badge = panel.get_by_role("link", name=re.compile(r"^0 running and 0 queued jobs"))
    badge.focus()
    panel.keyboard.press("Enter")
    expect(group.get_by_role("button", name=re.compile("^Active"))).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(panel.locator("#empty")).to_contain_text("No active jobs.")


def test_screen_readers_get_names_roles_and_live_regions(
    panel: Page, system: System, org: str
) -> None:
    running = system.enqueue(org, "sleep", {"seconds": 60})
    system.wait_status(org, running, "running")
    short = running[-8:]
    # The live state is a status region; the toasts are announced politely.
    expect(panel.get_by_role("status").filter(has_text="Live")).to_have_count(1)
    expect(panel.locator("#toasts")).to_have_attribute("aria-live", "polite")
    # The table has a caption and column headers; every control of a row says which job.
    table = panel.get_by_role("table", name=re.compile("The org's jobs"))
    expect(table.get_by_role("columnheader", name="Progress")).to_be_visible()
    bar = panel.get_by_role("progressbar", name=f"Progress of sleep {short}")
    expect(bar).to_have_attribute("aria-valuetext", re.compile(r"^\d+(\.\d+)? / 60$"))
    expect(panel.get_by_role("button", name=f"Cancel sleep {short}")).to_be_visible()
    expect(panel.get_by_role("button", name=f"Details of sleep {short}")).to_be_visible()
    expect(
        panel.get_by_role("link", name=re.compile(r"^1 running and 0 queued jobs"))
    ).to_be_visible(timeout=30_000)
    # The accessibility tree of the header, as a screen reader reads it.
    expect(panel.locator("header")).to_match_aria_snapshot(
        """
        - banner:
          - heading "Jobs" [level=1]
          - text: /org web-/
          - navigation "Views":
            - link "Jobs"
            - link "Schedules"
          - link /1 running and 0 queued jobs/:
            - text: 1 running 0 queued
          - status: Live
          - button "New job"
          - button "Sign out"
        """
    )
    panel.keyboard.press("n")
    form = panel.get_by_role("dialog", name="New job")
    expect(form).to_be_visible()
    expect(form.get_by_role("combobox", name="Type")).to_be_focused()
    expect(form.get_by_role("group", name="Payload")).to_be_visible()


# ---- the detail view -------------------------------------------------------------------------


def test_the_detail_view_shows_the_report_progress_and_a_timeline_of_every_timestamp(
    panel: Page, system: System, org: str
) -> None:
    from datetime import UTC, datetime, timedelta

    from jobs_core import NewJob
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    slept = system.enqueue(org, "sleep", {"seconds": 1})
    system.wait_status(org, slept, "done")
    row(panel, slept).get_by_role("button", name=re.compile("^Details")).click()
    detail = panel.get_by_role("dialog", name=re.compile(f"sleep · {slept}"))
    expect(detail).to_be_visible()
    job = system.job(org, slept)
    assert job["report"]
    report = detail.locator("#detail-report")
    for key in job["report"]:
        expect(report).to_contain_text(f'"{key}"')
    expect(detail.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    expect(detail.locator("#detail-error")).to_have_text("—")
    steps = detail.locator("#detail-timeline li")
    expect(steps).to_have_count(3)
    expect(steps.locator(".what")).to_have_text(["Created", "Started", "Finished"])
    # Each step after the first says how long after the creation it came.
    expect(steps.nth(0).locator(".offset")).to_have_text("")
    expect(steps.nth(2).locator(".offset")).to_have_text(re.compile(r"^\+\d"))
    panel.keyboard.press("Escape")

    # A job that runs later has a "Runs at" step, a day after its creation.
    engine = create_engine(system.url)
    try:
        now = datetime.now(UTC)
        later = PostgresJobStore(engine).insert_many(
            [NewJob(org, "noop", {"site_id": "later.example"}, run_at=now + timedelta(days=1))],
            now,
        )[0]
    finally:
        engine.dispose()
    row(panel, str(later.id)).get_by_role("button", name=re.compile("^Details")).click()
    steps = panel.locator("#detail-timeline li")
    expect(steps.locator(".what")).to_have_text(["Created", "Runs at"])
    expect(steps.nth(1).locator(".offset")).to_have_text(re.compile(r"^\+(1 d 0 h|23 h 59 min)$"))
