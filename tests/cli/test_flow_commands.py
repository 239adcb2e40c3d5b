"""Flow control at the terminal: ``--priority``, a type-owned dedup key, why a queued job waits,
and ``jobs workers`` (docs/flow-control.md)."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from jobs_core import SystemClock
from jobs_core.workers import WorkerInfo
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine

from tests.cli.helpers import InProcess, last_line, new_org

pytestmark = pytest.mark.postgres


def test_priority_and_a_type_owned_key(jobs_here: InProcess) -> None:
    org = new_org()
    code, out, _ = jobs_here("enqueue", "noop", "--org", org, "--new-org", "--priority", "7")
    assert code == 0
    job_id = last_line(out)
    code, table, _ = jobs_here("ls", "--org", org)
    header, row = table.splitlines()
    assert header.split()[3] == "PRIO"
    assert row.split()[3] == "7"
    code, out, err = jobs_here("enqueue", "noop", "--org", org, "--new-org", "--priority", "101")
    assert code == 2
    assert "-100..100" in err

    site = ["--payload", '{"site_id": 5}']
    code, out, _ = jobs_here("enqueue", "crawl_site", "--org", org, "--new-org", *site)
    assert code == 0
    crawl = last_line(out)
    code, out, _ = jobs_here("enqueue", "crawl_site", "--org", org, "--new-org", *site)
    assert code == 0
    assert last_line(out) == crawl
    assert "'crawl:5' is held by a queued job" in out
    code, out, err = jobs_here(
        "enqueue", "crawl_site", "--org", org, "--new-org", *site, "--dedup-key", "x"
    )
    assert code == 1
    assert "dedup_key" in err
    assert "crawl:5" in err

    code, shown, _ = jobs_here("show", job_id)
    assert code == 0
    assert re.search(r"^priority +7$", shown, re.M)
    assert re.search(r"^waiting +(no live worker serves type 'noop'|\d+ due jobs)", shown, re.M)
    code, out, _ = jobs_here("show", job_id, "--json")
    document = json.loads(out)
    assert document["priority"] == 7
    assert {w["code"] for w in document["waiting"]} <= {"ahead", "no_worker"}


def test_jobs_workers_lists_the_live_ones(jobs_here: InProcess, pg_engine: Engine) -> None:
    code, out, _ = jobs_here("workers")
    assert code == 0
    assert out.startswith("no live worker")
    now = SystemClock().now()
    worker = WorkerInfo(uuid.uuid4(), "box-7", 4321, ("noop", "sleep"), 4, now, now)
    PostgresJobStore(pg_engine).register_worker(worker)
    code, out, _ = jobs_here("workers")
    assert code == 0
    header, row, total = out.splitlines()
    assert header.split() == ["HOST", "PID", "SLOTS", "STARTED", "SEEN", "TYPES"]
    assert row.split()[:3] == ["box-7", "4321", "4"]
    assert row.endswith("noop, sleep")
    assert total == "1 live worker"
    code, out, _ = jobs_here("workers", "--json")
    assert json.loads(out)[0]["pid"] == 4321
