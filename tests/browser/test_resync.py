"""The panel given a ``resync`` event (docs/events.md): a client past its buffer loses the
buffered events and is told so; the panel must then re-read the list and the counts, and stay
live after it.

This module's system runs the API with a buffer of 5 events per client, so one statement that
enqueues 120 jobs overflows it: the real slow-client path of the server, reached with a browser
that reads as fast as it can.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, Request, expect

from tests.browser.conftest import running_system
from tests.browser.helpers import System

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BUFFER = 5
BURST = 120


@pytest.fixture(scope="module")
def system(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """The system of conftest, with a 5-event buffer per stream client."""
    with running_system(pg_url, tmp_path_factory, JOBS_EVENTS_CLIENT_BUFFER=str(BUFFER)) as built:
        yield built


def insert_burst(system: System, org: str, count: int) -> list[str]:
    """``count`` queued jobs in one transaction (one read of the feed, one dispatch); they run
    tomorrow, so the worker leaves them queued. Their ids, oldest first."""
    from jobs_core import NewJob
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    engine = create_engine(system.url)
    try:
        store = PostgresJobStore(engine)
        later = datetime.now(UTC) + timedelta(days=1)
        jobs = store.insert_many(
            [NewJob(org, "noop", {"n": n}, run_at=later) for n in range(count)],
            datetime.now(UTC),
        )
        return [str(job.id) for job in jobs]
    finally:
        engine.dispose()


def test_a_resync_makes_the_panel_read_the_list_again_and_it_stays_live(
    panel: Page, system: System, org: str
) -> None:
    panel.evaluate("window.__noReload = 'kept'")
    expect(panel.locator("#empty")).to_contain_text("No jobs yet")
    list_reads: list[str] = []

    def record(request: Request) -> None:
        if re.search(r"/jobs\?", request.url) and "/jobs/events" not in request.url:
            list_reads.append(request.url)

    panel.on("request", record)
    ids = insert_burst(system, org, BURST)

    # Only the events after the last overflow reached the page (fewer than the buffer); the
    # resync made it read the first page and the counts again: 50 rows, newest first.
    expect(panel.locator("#count-queued")).to_have_text(str(BURST), timeout=30_000)
    expect(panel.locator("#rows tr")).to_have_count(50, timeout=30_000)
    assert list_reads, "the panel did not read the list again after the resync"
    shown = panel.locator("#rows tr").evaluate_all("rows => rows.map((r) => r.dataset.id)")
    first_page = [job["id"] for job in system.call("GET", "/jobs?limit=50", org)["items"]]
    assert shown == first_page  # the API's first page, in its order: no gap, no stray row
    assert set(shown) <= set(ids)
    expect(panel.locator("[data-filter=''] .count")).to_have_text(str(BURST))

    # The stream goes on after the resync: a later change arrives as an event.
    reads_before = len(list_reads)
    system.call("POST", f"/jobs/{shown[0]}/cancel", org)
    expect(panel.locator(f"tr[data-id='{shown[0]}'] .badge")).to_have_text("cancelled")
    expect(panel.locator("#count-queued")).to_have_text(str(BURST - 1))
    assert len(list_reads) == reads_before  # by the event, not by reading the list again
    assert panel.evaluate("window.__noReload") == "kept"


def test_a_resync_keeps_the_rows_that_stay_and_the_keyboard_focus(
    panel: Page, system: System, org: str
) -> None:
    """The re-read after a resync updates the rows in place: a person tabbing through the table
    keeps their place, and the row's control is the same element (an open dialog gives the
    focus back to it when it closes)."""
    [first] = insert_burst(system, org, 1)
    opener = panel.get_by_role("button", name=re.compile(r"^noop \w+: open details$"))
    expect(opener).to_have_count(1)
    opener.focus()
    opener.evaluate("node => { node.dataset.marked = 'before the resync'; }")
    list_reads: list[str] = []
    panel.on(
        "request",
        lambda request: (
            list_reads.append(request.url)
            if re.search(r"/jobs\?", request.url) and "/jobs/events" not in request.url
            else None
        ),
    )

    insert_burst(system, org, 2 * BUFFER + 10)  # past the buffer: a resync, then a re-read

    expect(panel.locator("#rows tr")).to_have_count(2 * BUFFER + 11, timeout=30_000)
    assert list_reads, "the panel did not read the list again after the resync"
    kept = panel.locator(f"tr[data-id='{first}'] td.type button")
    expect(kept).to_have_attribute("data-marked", "before the resync")
    expect(kept).to_be_focused()
