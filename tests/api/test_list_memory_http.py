"""A page of jobs stays small whatever the jobs hold (docs/http.md, "Bounded responses"; issue
23): three clients listing 200 jobs of ~1 MiB payload each leave the real API process's memory
flat, and the list says which values it left out."""

from __future__ import annotations

import concurrent.futures
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from jobs_core import JobService, SystemClock, uuid7
from jobs_tokens import issue_token

from tests.api.helpers import make_registry
from tests.api.server import ApiProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOBS = 200
PAYLOAD_CHARS = 1024 * 1024 - 64  # just under the 1 MiB body limit
CLIENTS = 3
ROUNDS = 2
GROWTH_BOUND = 64 * 1024 * 1024
"""What the process's peak may grow by while the clients list: pages, threads' buffers, the
allocator's slack. Building the pages whole took 200 MB per request (issue 23: 2.1 GB for three)."""


def memory_kib(pid: int, field: str) -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (the peak) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


def _copy(engine: Any, job_id: uuid.UUID, count: int) -> None:
    """``count`` copies of the stored job ``job_id``, each with an id of its own, made in one
    INSERT ... SELECT: the rows the list reads are the store's own, every column as the store
    wrote it. Enqueuing the 200 MiB through the store took 10-12 s (the quiet machine's
    server), two thirds of the test's time, none of it what the test is about."""
    from sqlalchemy import text

    with engine.begin() as conn:
        columns = ", ".join(
            conn.execute(
                text(
                    "SELECT quote_ident(column_name) FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND table_name = 'jobs'"
                    " AND column_name <> 'id' AND is_generated = 'NEVER'"
                    " ORDER BY ordinal_position"
                )
            ).scalars()
        )
        conn.execute(
            text(
                f"INSERT INTO jobs (id, {columns}) SELECT copy, {columns}"
                " FROM jobs, unnest(CAST(:ids AS uuid[])) AS copy WHERE jobs.id = :source"
            ),
            {"ids": [uuid7() for _ in range(count)], "source": job_id},
        )


def test_three_clients_listing_200_jobs_of_1_mib_leave_the_api_memory_flat(
    pg_url: str, pg_engine: Any
) -> None:
    from jobs_postgres.store import PostgresJobStore
    from jobs_postgres.tokens import PostgresTokenStore

    token, _ = issue_token(PostgresTokenStore(pg_engine), "org-big", None, SystemClock().now())
    service = JobService(PostgresJobStore(pg_engine), make_registry(), SystemClock())
    big = {"blob": "x" * PAYLOAD_CHARS}
    first = service.enqueue("org-big", "noop", big).job
    _copy(pg_engine, first.id, JOBS - 1)
    small = service.enqueue("org-big", "noop", {"site": 1}).job

    api = ApiProcess(
        {"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres"}, ("tests.api.helpers:registry",)
    )
    try:
        pid = api.process.pid
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=api.base_url, timeout=120, headers=auth) as http:
            # Warm: every code path of the list loaded once, on a page of one small job.
            assert http.get("/jobs", params={"limit": 1}).status_code == 200
            before = memory_kib(pid, "VmHWM")

            def list_all(_: int) -> list[dict[str, Any]]:
                page = http.get("/jobs", params={"limit": JOBS})
                assert page.status_code == 200
                items: list[dict[str, Any]] = page.json()["items"]
                return items

            with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
                pages = list(pool.map(list_all, range(CLIENTS * ROUNDS)))
            peak = memory_kib(pid, "VmHWM")

            whole = http.get(f"/jobs/{pages[0][-1]['id']}").json()
        assert all(len(page) == JOBS for page in pages)
        listed = {job["id"]: job for job in pages[0]}
        assert listed[str(small.id)]["payload"] == {"site": 1}
        assert listed[str(small.id)]["truncated"] == []
        cut = [job for job in pages[0] if job["id"] != str(small.id)]
        assert all(job["payload"] is None and job["truncated"] == ["payload"] for job in cut)
        assert whole["payload"] == big  # whole, read alone
        assert whole["truncated"] == []
        grown = (peak - before) * 1024
        assert grown < GROWTH_BOUND, f"the API's peak memory grew by {grown / 2**20:.0f} MiB"
    finally:
        api.stop()
