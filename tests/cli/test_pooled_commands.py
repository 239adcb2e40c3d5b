"""``jobs`` through PgBouncer in transaction mode (``JOBS_DATABASE_POOLER=transaction``;
decision 0040): the migrations and the job commands work there; a wrong mode is one clear line.
The pooled tests are skipped, with the reason, without pgbouncer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, clean_env, last_line, new_org, ok, run_jobs

pytestmark = [pytest.mark.postgres]


@pytest.mark.pooler
@pytest.mark.slow
def test_migrate_enqueue_ls_show_cancel_through_the_pooler(
    pooled_url: str, pooled_engine: object, tmp_path: Path
) -> None:
    env = clean_env(
        JOBS_DATABASE_URL=pooled_url,
        JOBS_DATABASE_POOLER="transaction",
        JOBS_DATA_DIR=str(tmp_path / "data"),
        JOBS_DEMO_TYPES="1",
    )
    ok(run_jobs(env, "migrate"))  # already migrated (through the pooler too): nothing to do
    org = new_org()
    job_id = last_line(ok(run_jobs(env, "enqueue", "noop", "--org", org, "--new-org")))
    assert ok(run_jobs(env, "ls", "--org", org)).splitlines()[1].split()[:3] == [
        job_id,
        "noop",
        "queued",
    ]
    shown = json.loads(ok(run_jobs(env, "show", job_id, "--org", org, "--json")))
    # The pooled database's timezone is not UTC: timestamps are still read as UTC.
    assert shown["created_at"].endswith(("+00:00", "Z")), shown["created_at"]
    assert f"cancelled job {job_id}" in ok(run_jobs(env, "cancel", job_id, "--org", org))


def test_a_wrong_pooler_mode_is_one_line_saying_what_to_use(pg_url: str) -> None:
    env = clean_env(JOBS_DATABASE_URL=pg_url, JOBS_DATABASE_POOLER="session", JOBS_DEMO_TYPES="1")
    result = run_jobs(env, "ls")
    assert_one_line_error(result, 2, "JOBS_DATABASE_POOLER='session'", "'transaction'")
