"""``import_api`` against a fake search-analytics API (a real HTTP server on 127.0.0.1), run in
process on PostgreSQL: pages, the same rows and report as a CSV of the same data, the consistent
set, and what each answer of the source does (snooze, retry from the cursor, fail)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from jobs_core import Status
from jobs_imports.api_sources import ApiSources, InvalidApiSource, InvalidDateRange, NoApiSource
from sqlalchemy import text

from tests.imports.api_source_kit import (  # noqa: F401 (fixtures: pytest sees them)
    api_module_fixture,
    api_target_fixture,
    current,
    figures,
    rows_without_ids,
    source_fixture,
    start,
)
from tests.imports.fake_source import TOKEN, Answer, FakeSource
from tests.imports.helpers import ORG, harness, run_next, upload

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import SiteTarget

pytestmark = pytest.mark.postgres

DAY = date(2025, 1, 1)


def csv_of(source: FakeSource) -> str:
    """The source's rows as the CSV export of the same data."""
    names = (
        "page",
        "query",
        "clicks",
        "impressions",
        "ctr",
        "position",
        "date",
        "country",
        "device",
    )
    lines = [",".join(names)]
    lines.extend(",".join(str(row[name]) for name in names) for row in source.rows)
    return "\n".join(lines) + "\n"


def test_the_pages_give_the_rows_and_report_of_the_same_data_as_a_csv(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    source.rows.append(dict(source.rows[0]))  # a repeated record: skipped, as in a CSV
    view = start(api_module, api_target, DAY, date(2025, 1, 31))
    job = run_next(api_module, "import_api")
    assert job is not None
    assert job.status is Status.DONE, job.error
    assert [r.page for r in source.requests] == [1, 2, 3, 4]
    assert source.requests[0].params == {"start_date": "2025-01-01", "end_date": "2025-01-31"}
    assert source.requests[1].params["cursor"] == "p2"
    status, report, _ = figures(api_module, view.record.id)
    assert status == "done"
    assert report["source"] == {"url": "http://127.0.0.1/v1/rows", "pages": 4}

    uploaded = upload(api_module, api_target, csv_of(source))
    assert run_next(api_module, "import_csv") is not None
    _, csv_report, _ = figures(api_module, uploaded.record.id)
    for name in ("read", "inserted", "skipped", "errors", "mapped"):
        assert report[name] == csv_report[name], name
    assert (report["read"], report["skipped"], report["errors"]) == (11, 1, 1)
    reasons = [sample["reason"] for sample in report["error_samples"]]
    assert reasons == [sample["reason"] for sample in csv_report["error_samples"]]
    assert reasons == ["clicks is not a whole number: lots"]
    assert rows_without_ids(api_module, view.record.id) == rows_without_ids(
        api_module, uploaded.record.id
    )


def test_the_same_range_twice_leaves_the_consistent_set_unchanged(
    api_module: ImportsModule, api_target: SiteTarget
) -> None:
    first = start(api_module, api_target, DAY)
    assert run_next(api_module, "import_api") is not None
    totals = api_module.service.search_totals(ORG, api_target.id)
    assert totals.rows == 9

    second = start(api_module, api_target, DAY)
    assert second.created  # a done one runs again
    assert second.record.id != first.record.id
    assert run_next(api_module, "import_api") is not None
    assert api_module.service.get_import(ORG, second.record.id).status == "done"
    assert api_module.service.search_totals(ORG, api_target.id) == totals


def test_the_same_range_while_pending_returns_that_import(
    api_module: ImportsModule, api_target: SiteTarget
) -> None:
    first = start(api_module, api_target, DAY, date(2025, 1, 7))
    again = start(api_module, api_target, DAY, date(2025, 1, 7))
    assert not again.created
    assert again.record.id == first.record.id


def test_one_api_import_runs_at_a_time_per_site_target(
    api_module: ImportsModule, api_target: SiteTarget
) -> None:
    start(api_module, api_target, DAY)
    start(api_module, api_target, date(2025, 1, 2))
    jobs = api_module.service.jobs  # a worker's claim: under the types' limits
    assert len(jobs.claim(5)) == 1  # the other waits for its key (the site target)
    assert jobs.claim(5) == []
    other = api_module.service.create_site_target(ORG, "Other", "https://other.example.com")
    ApiSources(api_module.service).configure(ORG, other.id, "https://api.example.net/r", "t")
    start(api_module, other, DAY)
    assert [job.payload["site_target_id"] for job in jobs.claim(5)] == [str(other.id)]


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_snoozes_without_spending_an_attempt(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource, status: int
) -> None:
    start(api_module, api_target, DAY)
    source.fail(3, Answer(status, {"Retry-After": "30"}))
    before = datetime.now(UTC)
    job = run_next(api_module, "import_api")
    assert job is not None
    assert job.status is Status.QUEUED
    assert (job.snoozes, job.attempts) == (1, 0)
    assert job.run_at >= before + timedelta(seconds=30)
    checkpoint = dict(job.progress or {})["checkpoint"]
    assert (checkpoint["cursor"], checkpoint["pages"], checkpoint["inserted"]) == ("p3", 2, 6)


def test_retry_after_zero_runs_again_from_the_cursor(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    view = start(api_module, api_target, DAY)
    source.fail(2, Answer(429, {"Retry-After": "0"}))
    assert run_next(api_module, "import_api") is not None  # snoozed
    job = run_next(api_module, "import_api")
    assert job is not None
    assert job.status is Status.DONE, job.error
    assert job.snoozes == 1
    assert [r.page for r in source.requests] == [1, 2, 2, 3, 4]  # page 1 not fetched again
    assert figures(api_module, view.record.id)[1]["read"] == 10


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_retries_with_backoff_from_the_cursor(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource, status: int
) -> None:
    view = start(api_module, api_target, DAY)
    source.fail(3, Answer(status))
    failed = run_next(api_module, "import_api")
    assert failed is not None
    assert failed.status is Status.QUEUED
    assert failed.attempts == 1
    assert f"HTTP {status}" in (failed.error or "")
    assert "retry_in_s" in (failed.report or {})
    done = run_next(api_module, "import_api")
    assert done is not None
    assert done.status is Status.DONE, done.error
    assert [r.page for r in source.requests] == [1, 2, 3, 3, 4]
    assert figures(api_module, view.record.id)[1]["inserted"] == 9


def test_server_errors_past_the_attempts_fail_the_import(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    view = start(api_module, api_target, DAY)
    source.fail(1, *[Answer(500)] * 5)
    for _ in range(5):
        job = run_next(api_module, "import_api")
    assert job is not None
    assert job.status is Status.FAILED
    assert job.attempts == 5
    ended = api_module.service.get_import(ORG, view.record.id)
    assert ended.status == "failed"
    assert "HTTP 500" in (ended.error or "")


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (401, "its token is refused"),
        (403, "its token is refused"),
        (404, "no such resource: check the API source's base URL"),
        (400, "the request was refused"),
        (302, "redirects are not followed"),
    ],
)
def test_a_client_error_fails_the_import_clearly(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource, status: int, says: str
) -> None:
    view = start(api_module, api_target, DAY)
    source.fail(2, Answer(status, {"Location": "https://elsewhere.example/"}))
    job = run_next(api_module, "import_api")
    assert job is not None
    assert job.status is Status.FAILED
    assert job.attempts == 1  # never retried
    ended = api_module.service.get_import(ORG, view.record.id)
    assert ended.status == "failed"
    assert f"HTTP {status}" in (ended.error or "")
    assert says in (ended.error or "")
    assert "page 2 of http://127.0.0.1/v1/rows" in (ended.error or "")


def test_a_wrong_token_and_a_wrong_url_fail_as_the_source_answers(
    api_module: ImportsModule, api_target: SiteTarget, source: FakeSource
) -> None:
    sources = ApiSources(api_module.service)
    sources.configure(ORG, api_target.id, source.url, "not-the-token")
    wrong_token = start(api_module, api_target, DAY)
    run_next(api_module, "import_api")
    assert "HTTP 401" in (current(api_module, wrong_token).error or "")
    sources.configure(ORG, api_target.id, source.url.replace("/v1/rows", "/v2/nope"), TOKEN)
    wrong_url = start(api_module, api_target, date(2025, 1, 2))
    run_next(api_module, "import_api")
    assert "HTTP 404" in (current(api_module, wrong_url).error or "")


def test_a_source_must_be_configured_and_usable(
    api_module: ImportsModule, api_target: SiteTarget, module: ImportsModule
) -> None:
    other = api_module.service.create_site_target(ORG, "Other", "https://other.example.com")
    with pytest.raises(NoApiSource):
        start(api_module, other, DAY)
    with pytest.raises(InvalidDateRange, match="date_to is before date_from"):
        start(api_module, api_target, date(2025, 2, 1), DAY)
    with pytest.raises(InvalidDateRange, match="more than 1000 days"):
        start(api_module, api_target, DAY, DAY + timedelta(days=1000))
    sources = ApiSources(api_module.service)
    for url, says in [
        ("https://user:pw@api.example.net/r", "credentials in token"),
        ("ftp://api.example.net/r", "http:// or https://"),
        ("https://api.example.net/r?key=1", "no query"),
    ]:
        with pytest.raises(InvalidApiSource, match=says):
            sources.configure(ORG, other.id, url, "token")
    with pytest.raises(InvalidApiSource, match="without spaces"):
        sources.configure(ORG, other.id, "https://api.example.net/r", "two words")
    # without JOBS_ALLOW_PRIVATE_URLS a source on a private host is refused
    with pytest.raises(InvalidApiSource, match="loopback"):
        ApiSources(module.service).configure(ORG, other.id, "http://127.0.0.1:9/r", "token")


def test_a_cancelled_api_import_ends_cancelled_and_its_range_can_start_again(
    api_module: ImportsModule, api_target: SiteTarget
) -> None:
    view = start(api_module, api_target, DAY)
    kit = harness(api_module)
    assert view.job is not None
    kit.cancel(view.job)
    assert kit.run_end_hooks() == 1
    with api_module.service.engine.connect() as conn:
        status = conn.execute(
            text("SELECT status FROM imports WHERE id = :id"), {"id": view.record.id}
        ).scalar_one()
    assert status == "cancelled"
    assert start(api_module, api_target, DAY).created


def test_an_api_job_naming_a_csv_import_fails_clearly(
    api_module: ImportsModule, api_target: SiteTarget
) -> None:
    uploaded = upload(api_module, api_target, "Page,Clicks\n/a,1\n")
    job = api_module.service.jobs.enqueue(
        ORG,
        "import_api",
        {"import_id": str(uploaded.record.id), "site_target_id": str(api_target.id)},
    ).job
    ran = run_next(api_module, "import_api")
    assert ran is not None
    assert ran.id == job.id
    assert ran.status is Status.FAILED
    assert f"import {uploaded.record.id} is not of kind api" in (ran.error or "")
    # the CSV import is not the API job's: its end hook leaves it alone
    harness(api_module).run_end_hooks()
    assert api_module.service.get_import(ORG, uploaded.record.id).record.status == "pending"
