"""Nothing of the server leaks to tenants (issue 23; docs/http.md): a failed job's traceback,
read over a real API process after a real worker ran it, shows the handler's frames only with
paths relative to their package; free-text fields have limits; a 422 names the field and the
limit, never the whole value."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jobs_core import SystemClock
from jobs_core.schedules import TEXT_LIMITS, Schedule, ScheduleInvalid
from jobs_tokens import issue_token

from tests.api.server import ApiProcess
from tests.worker.processes import WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

REGISTRIES = ("tests.api.helpers:registry", "tests.api.helpers:failing_registry")
ANSWER_MAX_CHARS = 2000
"""A refusal of a 10 KB value is a short answer."""


@pytest.fixture
def api(pg_url: str) -> Iterator[ApiProcess]:
    started = ApiProcess({"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres"}, REGISTRIES)
    yield started
    started.stop()


@pytest.fixture
def http(api: ApiProcess, pg_engine: Any) -> Iterator[httpx.Client]:
    from jobs_postgres.tokens import PostgresTokenStore

    token, _ = issue_token(PostgresTokenStore(pg_engine), "org-leaks", None, SystemClock().now())
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=api.base_url, timeout=30, headers=headers) as client:
        yield client


def test_a_failed_jobs_traceback_shows_the_handlers_frames_only(
    http: httpx.Client, pg_url: str, tmp_path: Path
) -> None:
    worker = WorkerProcess(
        pg_url, tmp_path / "worker.log", {"JOBS_EXTRA_REGISTRIES": REGISTRIES[1]}
    )
    try:
        worker.wait_started()
        job_id = http.post("/jobs", json={"type": "explode"}).json()["id"]
        deadline = time.monotonic() + 60
        while (job := http.get(f"/jobs/{job_id}").json())["status"] != "failed":
            assert time.monotonic() < deadline, f"the job did not fail: {job}"
            time.sleep(0.1)
    finally:
        worker.close()
    trace = job["report"]["traceback"]
    files = re.findall(r'File "([^"]+)"', trace)
    assert files[0] == "tests/api/helpers.py"  # the handler, relative to its sys.path entry
    assert "json/decoder.py" in files  # what it called, named by its package path
    assert not [name for name in files if name.startswith("/")], trace
    assert "jobs_core" not in trace
    assert "jobs_worker" not in trace
    assert trace.rstrip().splitlines()[-1].startswith("json.decoder.JSONDecodeError")


def short_refusal(answer: httpx.Response, loc: list[str]) -> dict[str, Any]:
    assert answer.status_code == 422, answer.text[:500]
    assert len(answer.text) < ANSWER_MAX_CHARS, "the refusal echoes the value"
    problem: dict[str, Any] = answer.json()
    assert [error["loc"] for error in problem["errors"]] == [loc]
    return problem


@pytest.mark.parametrize(
    ("field", "limit"),
    [
        ("cron", TEXT_LIMITS["cron"]),
        ("description", TEXT_LIMITS["description"]),
        ("timezone", TEXT_LIMITS["timezone"]),
        ("name", TEXT_LIMITS["name"]),
    ],
)
def test_a_schedules_free_text_has_a_limit_the_422_names(
    http: httpx.Client, field: str, limit: int
) -> None:
    name = f"nightly-{uuid.uuid4().hex[:8]}"  # schedules outlive a test's tables
    schedule = {"name": name, "type": "noop", "cron": "0 4 * * *"}
    created = http.post("/schedules", json={**schedule, field: "x" * 10_000})
    problem = short_refusal(created, ["body", field])
    assert str(limit) in problem["errors"][0]["msg"]
    assert http.post("/schedules", json=schedule).status_code == 201
    changed = http.patch(f"/schedules/{name}", json={field: "x" * 900_000})
    assert str(limit) in short_refusal(changed, ["body", field])["errors"][0]["msg"]


def test_a_422_never_echoes_a_long_field_name_or_value(http: httpx.Client) -> None:
    long_key = "k" * 10_000
    answer = http.post("/jobs", json={"type": "noop", long_key: 1})
    assert answer.status_code == 422
    assert len(answer.text) < ANSWER_MAX_CHARS
    assert answer.json()["errors"][0]["loc"][1].endswith("(10000 characters)")
    no_route = http.get("/" + "p" * 8000)
    assert no_route.status_code == 404
    assert len(no_route.text) < ANSWER_MAX_CHARS


def test_every_writer_of_a_schedule_meets_the_same_limits() -> None:
    # The core checks them (the CLI and a module's declarations too), naming the field.
    with pytest.raises(ScheduleInvalid) as refused:
        Schedule("nightly", "org", "noop", "0 4 * * *", description="d" * 2001)
    assert refused.value.field == "description"
    assert "2000" in str(refused.value)
    assert "ddd" not in str(refused.value)
