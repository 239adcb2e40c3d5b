"""``GET /metrics`` of a real API process (issue 24): operators only, scraped over real HTTP
and parsed with ``prometheus_client``'s parser, on the session's PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from jobs_core import JobService, SystemClock
from jobs_tokens import TokenStore, issue_token

from tests.api.helpers import registry
from tests.api.server import ApiProcess
from tests.scrape import samples

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def api(pg_url: str) -> Iterator[ApiProcess]:
    process = ApiProcess(
        {"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres", "JOBS_OPERATOR_ORGS": "ops"},
        ("tests.api.helpers:registry",),
    )
    yield process
    process.stop()


def test_metrics_are_an_operators_and_count_the_live_jobs(api: ApiProcess, pg_engine: Any) -> None:
    from jobs_postgres.store import PostgresJobStore
    from jobs_postgres.tokens import PostgresTokenStore

    tokens: TokenStore = PostgresTokenStore(pg_engine)
    now = SystemClock().now()
    operator, _ = issue_token(tokens, "ops", "metrics test", now)
    tenant, _ = issue_token(tokens, "tenant", "metrics test", now)
    as_tenant = {"Authorization": f"Bearer {tenant}"}
    # A job due in an hour (not over HTTP, which takes no run_at): not counted as this
    # process's enqueue, counted among the live jobs as scheduled.
    scheduler = JobService(PostgresJobStore(pg_engine), registry, SystemClock())
    scheduler.enqueue("tenant", "greet", {"name": "Cy"}, run_at=now + timedelta(hours=1))
    with httpx.Client(base_url=api.base_url, timeout=10) as http:
        for name in ("Ada", "Bob"):
            body = {"type": "greet", "payload": {"name": name}}
            assert http.post("/jobs", json=body, headers=as_tenant).status_code == 202

        assert http.get("/metrics").status_code == 401
        refused = http.get("/metrics", headers=as_tenant)
        assert refused.status_code == 403
        assert "JOBS_OPERATOR_ORGS" in refused.json()["detail"]

        scraped = http.get("/metrics", headers={"Authorization": f"Bearer {operator}"})
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    seen = samples(scraped.text)
    assert seen[("jobs_enqueued_total", (("type", "greet"),))] == 2
    assert seen[("jobs_queued", (("type", "greet"),))] == 2
    assert seen[("jobs_scheduled", (("type", "greet"),))] == 1
    assert ("jobs_running", (("type", "greet"),)) not in seen
    assert seen[("jobs_event_streams_open", ())] == 0
    jobs_labels = {
        name for metric, pairs in seen if metric.startswith("jobs_") for name, _ in pairs
    }
    assert jobs_labels <= {"type", "outcome", "le"}  # never a job's or an org's id
