"""The chaos suite's workload plans and its witness journals, without processes: a plan stops
at the attempt that ends the job, the same seed draws the same jobs, and a journal line that
cannot be read is counted, never silently dropped."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest

from bench.chaos import jobtype, plan


def test_a_plan_ends_at_the_first_attempt_that_ends_the_job() -> None:
    config = plan.PlanConfig(retry_p=0.5, fail_p=0.1, raise_p=0.1, bad_return_p=0.1)
    rng = random.Random(7)
    plans = [plan.draw_plan(rng, config) for _ in range(2000)]
    for letters in plans:
        assert 1 <= len(letters) <= jobtype.MAX_ATTEMPTS
        assert set(letters[:-1]) <= {"r"}, letters  # only retries before the last letter
    assert {p[-1] for p in plans} == {"o", "r", "f", "x", "b"}
    assert max(len(p) for p in plans) == jobtype.MAX_ATTEMPTS  # some retry every attempt


def test_what_an_attempt_does_depends_only_on_its_number() -> None:
    assert [jobtype.planned_kind("rrf", n) for n in (1, 2, 3)] == ["retry", "retry", "fail"]
    assert jobtype.planned_kind("rx", 2) == "raise"
    assert jobtype.planned_kind("r", 2) == "ok"  # beyond the plan: success
    assert jobtype.planned_kind("b", 1) == "bad_return"


def test_the_same_seed_draws_the_same_jobs_and_long_jobs_come_in_their_share() -> None:
    config = plan.PlanConfig(long_p=0.1, long_min_ms=5000, long_max_ms=6000, mean_ms=40)
    first = plan.payloads(random.Random(3), 3000, config)
    assert first == plan.payloads(random.Random(3), 3000, config)
    long_jobs = [p for p in first if p["ms"] >= 5000]
    assert 200 < len(long_jobs) < 400
    assert all(p["ms"] <= 6000 for p in long_jobs)
    short = [p["ms"] for p in first if p["ms"] < 5000]
    assert max(short) <= 400  # capped at 10x the mean


@pytest.mark.parametrize(
    "field",
    [{"retry_p": 0.6, "fail_p": 0.5}, {"long_p": 1.5}, {"long_min_ms": 9, "long_max_ms": 1}],
)
def test_impossible_plan_settings_are_refused(field: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        plan.PlanConfig(**field)


def test_journals_are_read_back_whole_and_a_torn_line_is_counted() -> None:
    with tempfile.TemporaryDirectory(prefix="chaos-journal-test-") as tmp:
        directory = Path(tmp)
        row = ["e1", "start", "j1", 1, 42, 1.5, 10, "ok"]
        (directory / "42.jsonl").write_text(json.dumps(row) + "\n" + '["e1", "end", "j1"')
        (directory / "43.jsonl").write_text(json.dumps([*row[:4], 43, 2.0, 10, "ok"]) + "\n")
        (directory / "notes.txt").write_text("not a journal")
        rows, unreadable = jobtype.read_journals(directory)
    assert rows == [tuple(row), ("e1", "start", "j1", 1, 43, 2.0, 10, "ok")]
    assert unreadable == 1
