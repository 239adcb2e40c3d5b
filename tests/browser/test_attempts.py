"""Every attempt of a job in the panel's detail (issue 24, item 1): the attempts the API keeps
(``attempt_history`` of GET /jobs/{id}) are listed oldest first with their outcome, when they
started, how long they took and on which worker; a failed attempt shows its error and, folded,
its traceback as text. An open detail follows the job: when an event says an attempt ended, the
list is read again."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.browser.helpers import System, sign_in
from tests.cli.helpers import last_line, ok, run_jobs

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.xdist_group("browser-a"),  # one system for the group (conftest)
]


def test_a_failed_job_lists_its_attempt_with_the_error_and_its_traceback(
    context: BrowserContext, system: System, org: str
) -> None:
    enqueue = ["enqueue", "fail", "--org", org, "--new-org"]
    failed = last_line(ok(run_jobs(system.env, *enqueue, "--payload", '{"message": "no route"}')))
    panel = context.new_page()
    sign_in(panel, system, org)
    row = panel.locator(f"tr[data-id='{failed}']")
    expect(row.locator(".badge")).to_have_text("failed", timeout=30_000)

    row.locator("button[data-action='details']").click()
    attempts = panel.locator("#detail-attempts li[data-outcome]")
    expect(attempts).to_have_count(1)
    first = attempts.first
    expect(first).to_have_attribute("data-outcome", "failed")
    expect(first.locator(".attempt-no")).to_have_text("#1")
    expect(first.locator(".attempt-facts")).to_contain_text(re.compile(r"took \d+ ms · on \S+:\d+"))
    expect(first.locator(".attempt-error")).to_contain_text("no route")
    trace = first.locator(".attempt-trace")
    expect(trace.locator("pre")).to_be_hidden()  # folded until asked for
    trace.locator("summary").click()
    expect(trace.locator("pre")).to_contain_text("Traceback (most recent call last)")
    expect(trace.locator("pre")).to_contain_text("DemoFailure: no route")


def test_an_open_detail_follows_a_running_job_to_its_ended_attempt(
    context: BrowserContext, system: System, org: str
) -> None:
    panel = context.new_page()
    sign_in(panel, system, org)
    enqueue = ["enqueue", "sleep", "--org", org, "--new-org"]
    job = last_line(ok(run_jobs(system.env, *enqueue, "--payload", '{"seconds": 4}')))
    row = panel.locator(f"tr[data-id='{job}']")
    expect(row.locator(".badge")).to_have_text("running", timeout=30_000)
    row.locator("button[data-action='details']").click()
    attempts = panel.locator("#detail-attempts li[data-outcome]")
    expect(attempts).to_have_count(1)
    expect(attempts.first).to_have_attribute("data-outcome", "running")

    # the job ends while its detail is open: the event triggers a new read of its attempts
    expect(panel.locator("#detail-status .badge")).to_have_text("done", timeout=30_000)
    expect(attempts).to_have_count(1)
    expect(attempts.first).to_have_attribute("data-outcome", "done")
    expect(attempts.first.locator(".attempt-facts")).to_contain_text(re.compile(r"took [45] s"))
