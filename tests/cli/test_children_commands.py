"""A job's children at the terminal (decision 0045): ``jobs ls --parent ID`` lists them (in the
org given, or any), ``jobs show`` says how many ended, ``--json`` too."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from jobs_core import NewJob, SystemClock
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine

from tests.cli.helpers import InProcess, last_line, new_org

pytestmark = pytest.mark.postgres


def test_ls_parent_lists_the_children_and_show_counts_them(
    jobs_here: InProcess, pg_engine: Engine
) -> None:
    org = new_org()
    code, out, _ = jobs_here("enqueue", "noop", "--org", org, "--new-org")
    assert code == 0
    parent = uuid.UUID(last_line(out))
    store = PostgresJobStore(pg_engine)
    now = SystemClock().now()
    kids = [store.insert(NewJob(org, "noop", {"n": n}, parent_id=parent), now) for n in range(2)]
    assert all(kid is not None for kid in kids)
    ids = {str(kid.id) for kid in kids if kid is not None}
    code, _, _ = jobs_here("cancel", sorted(ids)[0], "--org", org)
    assert code == 0

    code, out, _ = jobs_here("ls", "--parent", str(parent), "--org", org, "--json")
    assert code == 0
    listed = json.loads(out)
    assert {job["id"] for job in listed} == ids
    assert {job["parent_id"] for job in listed} == {str(parent)}
    code, out, _ = jobs_here("ls", "--parent", str(parent))  # any org: an operator's read
    assert code == 0
    assert len(out.splitlines()) == 3  # the header and the two children
    other = new_org()
    code, out, _ = jobs_here("ls", "--parent", str(parent), "--org", other)
    assert (code, out.strip()) == (0, f"no jobs for org {other} of job {parent}")

    code, out, _ = jobs_here("show", str(parent))
    assert code == 0
    assert re.search(r"^children +1 of 2 ended$", out, re.M)
    code, out, _ = jobs_here("show", str(parent), "--json")
    assert json.loads(out)["children"] == {"total": 2, "ended": 1}
    code, out, _ = jobs_here("show", sorted(ids)[1], "--json")
    assert json.loads(out)["children"] is None


def test_ls_parent_refuses_what_is_not_a_job_id(jobs_here: InProcess) -> None:
    code, _, err = jobs_here("ls", "--parent", "nope")
    assert code == 2
    assert "'nope' is not a job id" in err
    code, out, _ = jobs_here("ls", "--help")
    assert "--parent ID" in out
    assert "only the children of job ID" in " ".join(out.split())
