"""``jobs enqueue --after ID``: the job waits for ID (decision 0041), a bad id is refused
saying which, and ``jobs ls --status waiting`` lists it."""

from __future__ import annotations

import uuid

import pytest

from tests.cli.helpers import InProcess, last_line, new_org

pytestmark = [pytest.mark.postgres]


def test_a_job_enqueued_after_another_waits_for_it(jobs_here: InProcess) -> None:
    org = new_org()
    code, out, _ = jobs_here("enqueue", "noop", "--org", org, "--new-org")
    assert code == 0
    first = last_line(out)
    code, out, err = jobs_here("enqueue", "noop", "--org", org, "--after", first)
    assert (code, err) == (0, "")
    assert out.startswith(f"enqueued noop job for org {org}: waiting")
    waiter = last_line(out)
    code, out, _ = jobs_here("ls", "--org", org, "--status", "waiting")
    assert code == 0
    assert out.count("waiting") == 1
    code, out, _ = jobs_here("show", waiter)
    assert code == 0
    assert "waits for other jobs to end" in out
    assert "awaits       0 of 1 ended (1 queued)" in out
    assert f"  {first}  queued     noop" in out  # each awaited job, listed


def test_an_unknown_dependency_is_refused_and_named(jobs_here: InProcess) -> None:
    org = new_org()
    assert jobs_here("enqueue", "noop", "--org", org, "--new-org")[0] == 0
    absent = str(uuid.uuid4())
    code, _, err = jobs_here("enqueue", "noop", "--org", org, "--after", absent)
    assert code == 1
    assert absent in err
    assert "not jobs of the org" in err
    late = ("--run-at", "2030-01-01T00:00:00")
    code, _, err = jobs_here("enqueue", "noop", "--org", org, "--after", absent, *late)
    assert code == 2
    assert "--after and --run-at do not go together" in err
