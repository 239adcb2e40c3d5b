"""The Schedules view of the panel (issue 17, point 1) in headless Chromium, against a real API
and a real worker on PostgreSQL: the list with next runs and last jobs, pause, resume, run now,
the jump to a job's detail, accessibility and the README's pictures, light and dark.

Schedules are created over HTTP with the org's bearer token, as an operator's script would; the
panel acts on them with its session cookie and CSRF token. Their crons tick a few times a day at
most (04:00, 03:30, every six hours), so the jobs a test looks at come from "run now", not from
the worker's scheduler.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.helpers import System, new_context, screenshot_dir, sign_in

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-c"),  # one system for the group (conftest)
]


def create(system: System, org: str, **fields: Any) -> dict[str, Any]:
    body = {"type": "noop", "cron": "0 4 * * *", "timezone": "UTC", **fields}
    created: dict[str, Any] = system.call("POST", "/schedules", org, body)
    return created


def schedule_row(page: Page, name: str) -> Any:
    return page.locator(f"#schedule-rows tr[data-schedule='{name}']")


def next_paris_4am(now: datetime) -> str:
    """The ISO instant of the next 04:00 in Paris after ``now`` (as the API writes it)."""
    tick = now.replace(hour=4, minute=0, second=0, microsecond=0)
    if tick <= now:
        tick = (tick + timedelta(days=1)).replace(hour=4)
    return tick.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_the_schedules_view_lists_pauses_resumes_and_runs_a_schedule(
    panel: Page, system: System, org: str
) -> None:
    made = create(
        system, org, name="nightly-report", timezone="Europe/Paris", description="The report"
    )
    assert datetime.fromisoformat(made["next_run_at"]) > datetime.now(tz=None).astimezone()
    panel.evaluate("window.__noReload = 'kept'")

    # The header link opens the view (keyboard: focus it, press Enter).
    link = panel.get_by_role("link", name="Schedules", exact=True)
    link.focus()
    panel.keyboard.press("Enter")
    expect(link).to_have_attribute("aria-current", "page")
    expect(panel.locator("#schedules-view")).to_be_visible()
    expect(panel.locator("#jobs-view")).to_be_hidden()
    assert "view=schedules" in panel.url

    row = schedule_row(panel, "nightly-report")
    expect(row).to_have_count(1)
    expect(row.locator("td.type")).to_have_text("noop")
    expect(row.locator("td.when")).to_contain_text("0 4 * * *")
    expect(row.locator("td.when")).to_contain_text("Europe/Paris")
    expect(row.locator("td.state")).to_have_text("enabled")
    expect(row.locator("td.next .rel")).to_have_text(re.compile(r"^in \d+ (s|min|h)"))
    # The next run in the schedule's zone: 04:00 in Paris, whatever the browser's zone.
    assert made["next_run_at"] == next_paris_4am(datetime.now(ZoneInfo("Europe/Paris")))
    expect(row.locator("td.next")).to_contain_text(
        datetime.fromisoformat(made["next_run_at"])
        .astimezone(ZoneInfo("Europe/Paris"))
        .strftime("%Y-%m-%d 04:00")
    )
    expect(row.locator("td.last")).to_have_text("never")

    # Pause, then resume, by keyboard: the focus stays on the toggle, whose name follows.
    pause = panel.get_by_role("button", name="Pause schedule nightly-report")
    pause.focus()
    panel.keyboard.press("Enter")
    expect(row).to_have_attribute("data-enabled", "false")
    expect(row.locator("td.state")).to_have_text("paused")
    resume = panel.get_by_role("button", name="Resume schedule nightly-report")
    expect(resume).to_be_focused()
    assert system.call("GET", "/schedules/nightly-report", org)["enabled"] is False
    panel.keyboard.press("Enter")
    expect(row).to_have_attribute("data-enabled", "true")
    expect(row.locator("td.next .rel")).to_be_visible()
    assert system.call("GET", "/schedules/nightly-report", org)["enabled"] is True

    # Run now: the job exists, the last run names it, the worker runs it.
    panel.get_by_role("button", name="Run schedule nightly-report now").click()
    job_link = row.locator("td.last button[data-job]")
    expect(job_link).to_have_count(1)
    job_id = job_link.get_attribute("data-job")
    assert job_id is not None
    assert system.call("GET", "/schedules/nightly-report", org)["last_job_id"] == job_id
    assert system.job(org, job_id)["type"] == "noop"
    system.wait_status(org, job_id, "done")

    # The jump: the Jobs view, the job's row (brought by the stream), its detail open.
    job_link.click()
    expect(panel.locator("#jobs-view")).to_be_visible()
    expect(panel.get_by_role("link", name="Jobs", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(panel.locator("#detail")).to_be_visible()
    expect(panel.locator("#detail-title")).to_contain_text(job_id)
    expect(panel.locator(f"#rows tr[data-id='{job_id}']")).to_have_attribute("data-status", "done")
    panel.keyboard.press("Escape")

    # Not live: a schedule made elsewhere shows when the view opens again.
    create(system, org, name="weekly-purge", cron="30 3 * * 1")
    panel.get_by_role("link", name="Schedules", exact=True).click()
    expect(schedule_row(panel, "weekly-purge")).to_have_count(1)
    assert panel.evaluate("window.__noReload") == "kept"


def test_the_schedules_view_shows_a_failed_action_and_an_empty_org(
    panel: Page, system: System, org: str
) -> None:
    panel.get_by_role("link", name="Schedules", exact=True).click()
    expect(panel.locator("#schedules-empty")).to_be_visible()
    expect(panel.locator("#schedules-empty")).to_contain_text("No schedules yet")

    create(system, org, name="gone-soon")
    panel.get_by_role("button", name="Refresh").click()
    expect(schedule_row(panel, "gone-soon")).to_have_count(1)
    system.call("DELETE", "/schedules/gone-soon", org)  # deleted behind the panel's back
    panel.get_by_role("button", name="Run schedule gone-soon now").click()
    expect(panel.locator(".toast-error")).to_contain_text("no schedule named 'gone-soon'")
    expect(schedule_row(panel, "gone-soon")).to_have_count(0)  # the list was read again


@pytest.fixture
def acme(system: System) -> Iterator[str]:
    """A readable org for the pictures, shared by both schemes (so both show the same list)."""
    yield "acme"
    system.cancel_active("acme")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_schedules_view_is_accessible_and_pictured(
    browser: Browser, system: System, acme: str, scheme: str
) -> None:
    if not system.call("GET", "/schedules", acme):  # the first scheme creates them
        create(
            system,
            acme,
            name="gsc-imports",
            cron="0 */6 * * *",
            description="Fetch the new Search Console exports",
        )
        create(system, acme, name="purge", cron="0 4 * * *", timezone="Europe/Paris")
        create(
            system,
            acme,
            name="weekly-report",
            cron="30 7 * * 1",
            timezone="America/New_York",
            description="Clicks and impressions of the week",
        )
        system.call("POST", "/schedules/gsc-imports/run", acme)
        system.call("POST", "/schedules/weekly-report/pause", acme)

    context = new_context(browser, scheme)
    try:
        page = context.new_page()
        sign_in(page, system, acme)
        page.get_by_role("link", name="Schedules", exact=True).click()
        expect(page.locator("#schedule-rows tr")).to_have_count(3)
        expect(schedule_row(page, "gsc-imports").locator("td.last button")).to_have_count(1)
        expect(schedule_row(page, "weekly-report").locator("td.state")).to_have_text("paused")
        results: Any = Axe().run(page)
        found = [
            f"{v['id']}: {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
            for v in results.response["violations"]
        ]
        assert found == []
        path = screenshot_dir() / ("schedules.png" if scheme == "light" else "schedules-dark.png")
        box = page.locator("#schedules-view .table-wrap").bounding_box()
        assert box is not None
        clip = {"x": 0, "y": 0, "width": 1400, "height": box["y"] + box["height"] + 20}
        page.screenshot(path=str(path), clip=clip)  # type: ignore[arg-type]
        assert path.stat().st_size > 10_000
    finally:
        context.close()
