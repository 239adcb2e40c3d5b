"""``jobs types``, ``jobs pause``, ``jobs resume`` at the terminal (issue 24): an operator pauses
a type, sees it in the table and in why a job waits, resumes it; an unknown type is refused."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import InProcess, new_org

pytestmark = pytest.mark.postgres


def test_an_operator_pauses_and_resumes_a_type(jobs_here: InProcess) -> None:
    org = new_org()
    code, out, err = jobs_here("enqueue", "noop", "--org", org, "--new-org")
    assert code == 0, err
    job_id = out.strip().splitlines()[-1]
    try:
        code, out, err = jobs_here("pause", "noop")
        assert code == 0, err
        assert "paused noop for every org" in out
        assert "jobs resume noop" in out
        code, out, _ = jobs_here("types")
        assert code == 0
        header, *lines = out.splitlines()
        assert header.split() == ["TYPE", "PUBLIC", "QUEUED", "PAUSED"]
        [noop] = [line for line in lines if line.split()[0] == "noop"]
        assert "since" in noop
        assert "by cli:" in noop
        [sleep] = [line for line in lines if line.split()[0] == "sleep"]
        assert sleep.split()[-1] == "-"
        code, out, _ = jobs_here("types", "--json")
        by_type = {row["type"]: row for row in json.loads(out)}
        assert by_type["noop"]["queued"] >= 1
        assert by_type["noop"]["paused_by"].startswith("cli:")
        assert by_type["sleep"]["paused_at"] is None
        code, out, _ = jobs_here("show", job_id, "--json")
        assert json.loads(out)["waiting"][0]["code"] == "type_paused"
    finally:
        code, out, err = jobs_here("resume", "noop")
    assert code == 0, err
    assert out.strip() == "resumed noop"
    code, out, _ = jobs_here("resume", "noop")
    assert out.strip() == "noop was not paused"
    code, out, _ = jobs_here("types", "--json")
    assert all(row["paused_at"] is None for row in json.loads(out))


def test_an_unknown_type_is_refused_with_the_known_ones(jobs_here: InProcess) -> None:
    code, _, err = jobs_here("pause", "nope")
    assert code == 1
    assert "unknown job type 'nope'" in err
    assert "noop" in err
    code, _, err = jobs_here("resume", "nope")
    assert code == 1
    assert "no type of that name is paused" in err
    assert jobs_here("pause")[0] == 2
