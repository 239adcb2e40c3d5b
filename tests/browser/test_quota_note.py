"""The panel shows an org near its quota (issue 23): a real API, a real worker, headless
Chromium; the quota is an operator's override (``jobs quotas set``), the queued jobs wait for
an instant far ahead (``--run-at``) so that no worker takes them."""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.browser.helpers import System, sign_in
from tests.cli.helpers import ok, run_jobs

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LATER = "2099-01-01T00:00:00+00:00"


def test_the_panel_says_when_the_org_is_near_its_quota_of_queued_jobs(
    context: BrowserContext, system: System, org: str
) -> None:
    ok(run_jobs(system.env, "quotas", "set", org, "--max-queued", "5"))
    try:
        page = context.new_page()
        sign_in(page, system, org)
        note = page.locator("#quota-note")
        expect(page.locator("#rows")).to_be_attached()
        expect(note).to_be_hidden()
        for _ in range(4):
            ok(
                run_jobs(
                    system.env, "enqueue", "noop", "--org", org, "--new-org", "--run-at", LATER
                )
            )
        # the counts are read again on the jobs' events; the note with them (at most every 5 s)
        expect(note).to_contain_text("4 of 5 queued jobs (80 %)", timeout=30_000)
        expect(note).to_contain_text("refused (429)")
        expect(note).to_have_attribute("role", "status")
    finally:
        ok(run_jobs(system.env, "quotas", "reset", org))
