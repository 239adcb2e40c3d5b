"""``jobs quotas`` and ``jobs doctor`` at the terminal (issue 23, decision 0033): an operator
sees each org's use of its quotas, changes one org's, gives them back, and the doctor warns of
an org near its quota."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import InProcess, new_org

pytestmark = pytest.mark.postgres


def test_an_operator_sees_changes_and_resets_an_orgs_quotas(jobs_here: InProcess) -> None:
    org = new_org()
    for _ in range(4):
        assert jobs_here("enqueue", "noop", "--org", org, "--new-org")[0] == 0
    code, out, err = jobs_here("quotas", "set", org, "--max-queued", "5", "--enqueue-rate", "2.5")
    assert code == 0, err
    assert "4/5" in out
    code, out, _ = jobs_here("quotas", "--org", org, "--json")
    [shown] = json.loads(out)["orgs"]
    assert shown["quotas"]["max_queued"] == 5
    assert shown["quotas"]["enqueue_rate"] == 2.5
    assert shown["usage"] == {"queued_jobs": 4, "schedules": 0}
    assert shown["overridden"] is True
    assert [n["quota"] for n in shown["near"]] == ["queued_jobs"]
    code, out, _ = jobs_here("quotas")
    assert code == 0
    assert out.startswith("defaults: 10,000 queued jobs")
    [row] = [line for line in out.splitlines() if line.startswith(org)]
    assert "queued_jobs 80%" in row

    code, out, _ = jobs_here("doctor", "--json")
    facts = [f for f in json.loads(out)["findings"] if f["subject"] == f"org {org}"]
    assert [f["level"] for f in facts] == ["warn"]
    assert "4 of its 5 queued jobs" in facts[0]["fact"]
    assert f"jobs quotas set {org} --max-queued" in facts[0]["advice"]

    code, _, err = jobs_here("quotas", "set", org, "--max-queued", "-3")
    assert code == 1
    assert "max_queued must be >= 0" in err
    code, _, err = jobs_here("quotas", "set", org, "--max-queued", "lots")
    assert code == 2
    assert "'lots' is not a number or 'default'" in err
    assert jobs_here("quotas", "set", org)[0] == 2  # nothing to change
    code, out, _ = jobs_here("quotas", "set", org, "--max-queued", "default")
    assert "4/10,000" in out
    code, out, _ = jobs_here("quotas", "reset", org)
    assert "back to the defaults" in out
    code, out, _ = jobs_here("quotas", "reset", org)
    assert "had no override" in out
    code, out, _ = jobs_here("doctor", "--json")
    assert not [f for f in json.loads(out)["findings"] if f["subject"] == f"org {org}"]
