"""The plain-text views of ``jobs ls`` and ``jobs show``: pure functions of a job and an instant."""

from __future__ import annotations

import dataclasses
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from jobs_cli import render
from jobs_core import Job, Status

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def make_job(**changes: object) -> Job:
    job = Job(
        id=uuid.UUID("01950000-0000-7000-8000-000000000001"),
        org_id="acme",
        type="sleep",
        status=Status.QUEUED,
        payload={"seconds": 3},
        created_at=NOW - timedelta(seconds=90),
        run_at=NOW - timedelta(seconds=90),
    )
    return dataclasses.replace(job, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "0ms"),
        (0.25, "250ms"),
        (42.9, "42s"),
        (185, "3m05s"),
        (7620, "2h07m"),
        (4 * 86400 + 3 * 3600 + 59, "4d03h"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert render.human_duration(seconds) == text


def test_progress_bar_from_done_and_total() -> None:
    job = make_job(status=Status.RUNNING, progress={"done": 3, "total": 6})
    assert render.progress_cell(job) == "[#####-----]  50%"


def test_progress_is_clamped_and_ignores_unusable_counts() -> None:
    assert render.progress_cell(make_job(progress={"done": 9, "total": 6})).endswith("100%")
    assert render.progress_cell(make_job(progress={"done": 1, "total": 0})) == "1 done"
    assert render.progress_cell(make_job(progress={"done": True, "total": 2})) == ""
    assert render.progress_cell(make_job(progress={"updated_at": NOW.isoformat()})) == ""


def test_a_done_job_without_counts_shows_full() -> None:
    assert render.progress_cell(make_job(status=Status.DONE)) == "[##########] 100%"


def test_run_time_of_running_finished_and_scheduled_jobs() -> None:
    started = NOW - timedelta(seconds=65)
    running = make_job(status=Status.RUNNING, started_at=started)
    assert render.run_time(running, NOW) == "1m05s"
    finished = make_job(
        status=Status.DONE, started_at=started, finished_at=started + timedelta(seconds=2)
    )
    assert render.run_time(finished, NOW) == "2s"
    scheduled = make_job(run_at=NOW + timedelta(minutes=5))
    assert render.run_time(scheduled, NOW) == "in 5m00s"
    assert render.run_time(make_job(), NOW) == ""


def test_table_lists_every_column_aligned() -> None:
    failed = make_job(
        id=uuid.UUID("01950000-0000-7000-8000-000000000002"),
        type="fail",
        status=Status.FAILED,
        attempts=1,
        error="boom\nwith a second line " + "x" * 80,
    )
    running = make_job(
        status=Status.RUNNING,
        attempts=1,
        progress={"done": 1, "total": 4},
        started_at=NOW - timedelta(seconds=2),
        cancel_requested_at=NOW,
    )
    text = render.jobs_table([running, failed], NOW, with_org=True)
    lines = text.splitlines()
    assert lines[0].split() == [
        "ID", "ORG", "TYPE", "STATUS", "PRIO", "PROGRESS", "ATTEMPTS", "AGE", "RAN", "ERROR"
    ]  # fmt: skip
    assert "running (cancelling)" in lines[1]
    assert "[##--------]  25%" in lines[1]
    assert "1/3" in lines[1]
    assert "1m30s" in lines[1]
    assert "boom with a second line" in lines[2]
    assert lines[2].endswith("…")
    assert len(lines[2]) < 200
    # aligned: every row's STATUS column starts where the header's does
    column = lines[0].index("STATUS")
    assert lines[1][column:].startswith("running")
    assert lines[2][column:].startswith("failed")


def test_details_show_every_field_and_the_documents() -> None:
    job = make_job(
        status=Status.DONE,
        attempts=1,
        started_at=NOW - timedelta(seconds=10),
        finished_at=NOW - timedelta(seconds=7),
        report={"slept": 3},
        requested_dedup_key="sleep:1",
    )
    text = render.job_details(job, NOW)
    assert re.search(r"^status +done$", text, re.M)
    assert re.search(r"^ran +3s$", text, re.M)
    assert re.search(r"^dedup key +sleep:1$", text, re.M)
    assert '"slept": 3' in text
    assert '"seconds": 3' in text
    assert "(1m30s ago)" in text


def test_json_view_has_the_api_fields() -> None:
    data = render.job_json(make_job())
    for key in ("id", "type", "status", "progress", "report", "error", "created_at"):
        assert key in data
    assert data["status"] == "queued"
    assert data["started_at"] is None


def test_details_and_json_show_the_parent_of_a_child() -> None:
    parent = make_job()
    child = make_job(id=uuid.UUID("01950000-0000-7000-8000-000000000002"), parent_id=parent.id)
    assert re.search(rf"^parent +{parent.id}$", render.job_details(child, NOW), re.M)
    assert re.search(r"^parent +-$", render.job_details(parent, NOW), re.M)
    assert render.job_json(child)["parent_id"] == str(parent.id)
    assert render.job_json(parent)["parent_id"] is None
