"""Pause and resume a job type from the panel (issue 24): a real API and worker with an operator
org, headless Chromium. The operator pauses ``noop``; a tenant sees the "paused" badge and no
button, and its new job waits queued; the operator resumes it and the job runs."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import running_system
from tests.browser.helpers import System, new_context, sign_in
from tests.cli.helpers import last_line, ok, run_jobs

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

OPERATOR = "web-ops"


@pytest.fixture(scope="module")
def ops_system(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """The API and a worker whose operator org is :data:`OPERATOR`."""
    with running_system(pg_url, tmp_path_factory, JOBS_OPERATOR_ORGS=OPERATOR) as built:
        yield built


def test_an_operator_pauses_a_type_a_tenant_sees_it_and_its_job_runs_once_resumed(
    browser: Browser, ops_system: System
) -> None:
    operator_context = new_context(browser)
    tenant_context = new_context(browser)
    try:
        operator = operator_context.new_page()
        sign_in(operator, ops_system, OPERATOR)
        chip = operator.locator("#type-pauses .type-chip[data-type='noop']")
        expect(chip).to_be_visible()
        expect(chip.locator(".type-paused")).to_have_count(0)
        operator.get_by_role("button", name="Pause type noop").click()
        expect(chip.locator(".type-paused")).to_have_text("paused")
        expect(operator.get_by_role("button", name="Resume type noop")).to_be_visible()

        tenant_org = f"web-{secrets.token_hex(4)}"
        tenant = tenant_context.new_page()
        sign_in(tenant, ops_system, tenant_org)
        pauses = tenant.locator("#type-pauses")
        expect(pauses).to_be_visible()
        expect(pauses).to_contain_text("Paused job types")
        expect(pauses.locator(".type-chip")).to_have_count(1)
        expect(pauses.locator(".type-chip[data-type='noop'] .type-paused")).to_be_visible()
        expect(pauses.locator("button")).to_have_count(0)

        created = ok(run_jobs(ops_system.env, "enqueue", "noop", "--org", tenant_org))
        job_id = last_line(created)
        row = tenant.locator(f"tr[data-id='{job_id}']")
        expect(row).to_be_visible()
        shown = json.loads(ok(run_jobs(ops_system.env, "show", job_id, "--json")))
        assert shown["status"] == "queued"
        assert shown["waiting"][0]["code"] == "type_paused"

        operator.get_by_role("button", name="Resume type noop").click()
        expect(chip.locator(".type-paused")).to_have_count(0)
        expect(row.locator(".badge")).to_have_text("Done", ignore_case=True, timeout=30_000)
        tenant.reload()
        tenant.wait_for_selector("body[data-ready='true']")
        expect(tenant.locator("#type-pauses")).to_be_hidden()
    finally:
        run_jobs(ops_system.env, "resume", "noop")
        operator_context.close()
        tenant_context.close()
