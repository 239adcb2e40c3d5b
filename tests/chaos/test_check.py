"""The chaos suite's invariants, one rule at a time, on hand-made rows (no database, no
processes): each rule must fire on the case it exists for and stay quiet on the legal cases
around it (a kill mid-job, a re-run after a lost outcome, the sweep's failure at max)."""

from __future__ import annotations

import uuid

from jobs_core.domain import MAX_ATTEMPTS_EXCEEDED

from bench.chaos import check
from bench.chaos.check import JobRow, Lifetimes, RecordRow

A, B = 1001, 1002  # two worker pids
NO_DEATHS = Lifetimes(killed={}, exited={}, run_end=1000.0)


def job(
    status: str = "done",
    *,
    attempts: int = 1,
    plan: str = "o",
    error: str | None = None,
    finished_at: float | None = 100.0,
    max_attempts: int = 5,
    job_id: uuid.UUID | None = None,
) -> JobRow:
    return JobRow(
        id=job_id or uuid.uuid4(),
        status=status,
        attempts=attempts,
        max_attempts=max_attempts,
        error=error,
        finished_at=finished_at,
        plan=plan,
    )


def run(
    row: JobRow,
    attempt: int,
    pid: int,
    span: tuple[float, float | None],
    outcome: str = "ok",
) -> list[RecordRow]:
    """The start (and end, unless None) rows of one execution of ``row``."""
    start, end = span
    exec_id = uuid.uuid4()
    rows = [RecordRow(exec_id, "start", row.id, attempt, pid, start, 10, "ok")]
    if end is not None:
        rows.append(RecordRow(exec_id, "end", row.id, attempt, pid, end, 10, outcome))
    return rows


def verdict(
    jobs: list[JobRow],
    records: list[RecordRow],
    lifetimes: Lifetimes = NO_DEATHS,
    cancelled: set[uuid.UUID] | None = None,
    enqueued: set[uuid.UUID] | None = None,
) -> check.Verdict:
    return check.check(
        jobs,
        records,
        enqueued=enqueued if enqueued is not None else {j.id for j in jobs},
        cancel_requested=cancelled or set(),
        lifetimes=lifetimes,
    )


def test_a_clean_history_breaks_nothing() -> None:
    done = job()
    retried = job(attempts=2, plan="ro", finished_at=200.0)
    failed = job("failed", plan="f", error="ChaosFailure: planned failure (attempt 1)")
    records = [
        *run(done, 1, A, (10.0, 11.0)),
        *run(retried, 1, A, (12.0, 13.0), "retry"),
        *run(retried, 2, B, (14.0, 15.0)),
        *run(failed, 1, B, (16.0, 17.0), "fail"),
    ]
    result = verdict([done, retried, failed], records)
    assert result.ok, result.as_dict()
    assert result.executions == 4
    assert result.statuses == {"done": 2, "failed": 1}


def test_a_job_still_queued_or_running_is_lost_and_a_missing_one_too() -> None:
    queued = job("queued", attempts=0, finished_at=None)
    running = job("running", finished_at=None)
    never_stored = uuid.uuid4()
    result = verdict(
        [queued, running],
        run(running, 1, A, (10.0, None)),
        enqueued={queued.id, running.id, never_stored},
    )
    assert [lost["job_id"] for lost in result.lost] == [str(queued.id), str(running.id)]
    assert result.missing == [str(never_stored)]
    assert not result.ok


def test_two_executions_of_one_job_at_the_same_time_are_an_overlap() -> None:
    row = job(attempts=2, finished_at=50.0)
    records = [*run(row, 1, A, (10.0, 30.0), "cancelled"), *run(row, 2, B, (20.0, 25.0))]
    result = verdict([row], records)
    assert len(result.overlaps) == 1
    overlap = result.overlaps[0]
    assert overlap["seconds"] == 5.0
    assert (overlap["first"]["pid"], overlap["second"]["pid"]) == (A, B)
    assert not result.ok


def test_executions_that_follow_each_other_do_not_overlap() -> None:
    row = job(attempts=2, finished_at=50.0)
    records = [*run(row, 1, A, (10.0, 20.0), "retry"), *run(row, 2, B, (20.0, 25.0))]
    assert verdict([row], records).overlaps == []


def test_an_execution_cut_by_a_kill_ends_when_its_worker_was_killed() -> None:
    row = job(attempts=2, finished_at=50.0)
    records = [*run(row, 1, A, (10.0, None)), *run(row, 2, B, (20.0, 25.0))]
    killed_before = Lifetimes(killed={A: 15.0}, exited={}, run_end=1000.0)
    result = verdict([row], records, killed_before)
    assert result.ok, result.as_dict()
    assert result.open_killed == 1
    # Killed only after the second execution had started: they ran at the same time.
    killed_after = Lifetimes(killed={A: 22.0}, exited={}, run_end=1000.0)
    result = verdict([row], records, killed_after)
    assert [o["seconds"] for o in result.overlaps] == [2.0]


def test_an_execution_without_an_end_whose_worker_was_not_killed_runs_until_the_run_ended() -> None:
    row = job(attempts=2, finished_at=50.0)
    records = [*run(row, 1, A, (10.0, None)), *run(row, 2, B, (20.0, 25.0))]
    result = verdict([row], records)  # A never killed: it may still have been running
    assert result.open_unexplained == 1
    assert len(result.overlaps) == 1


def test_attempts_over_the_maximum_on_the_row_or_on_an_execution() -> None:
    over_row = job(attempts=6, plan="rrrrro", max_attempts=5)
    over_run = job(attempts=5, plan="rrrro", max_attempts=5, finished_at=100.0)
    records = [*run(over_row, 6, A, (10.0, 11.0)), *run(over_run, 5, A, (12.0, 13.0))]
    records += run(over_run, 7, B, (14.0, 15.0), "cancelled")
    result = verdict([over_row, over_run], records)
    assert sorted(o["attempts"] for o in result.over_attempts) == [6, 7]


def test_done_needs_a_successful_end_for_its_last_attempt() -> None:
    row = job(attempts=2, plan="ro")
    only_first = run(row, 1, A, (10.0, 11.0), "retry")
    result = verdict([row], only_first)
    assert "no successful end" in result.inconsistent[0]["why"]
    planned_failure = job(plan="f")
    result = verdict([planned_failure], run(planned_failure, 1, A, (10.0, 11.0), "ok"))
    assert "the plan says fail" in result.inconsistent[0]["why"]


def test_failed_must_match_what_its_last_attempt_raised() -> None:
    row = job("failed", plan="x", error="KeyError: 'chaos-missing-key'")
    assert verdict([row], run(row, 1, A, (10.0, 11.0), "raise")).ok
    bad = job("failed", plan="x", error="KeyError: 'chaos-missing-key'")
    result = verdict([bad], run(bad, 1, A, (10.0, 11.0), "ok"))
    assert "ended {'ok'}" in result.inconsistent[0]["why"]


def test_a_retryable_error_fails_a_job_only_at_its_last_attempt() -> None:
    early = job("failed", attempts=2, plan="rr", error="ChaosRetryable: planned (attempt 2)")
    result = verdict([early], run(early, 2, A, (10.0, 11.0), "retry"))
    assert "attempts left" in result.inconsistent[0]["why"]
    last = job("failed", attempts=2, plan="rr", max_attempts=2, error="ChaosRetryable: planned (2)")
    assert verdict([last], run(last, 2, A, (10.0, 11.0), "retry")).ok


def test_the_sweep_fails_a_job_only_after_its_last_attempt() -> None:
    swept = job("failed", attempts=5, plan="o", error=MAX_ATTEMPTS_EXCEEDED)
    assert verdict([swept], run(swept, 5, A, (10.0, None))).inconsistent == []
    early = job("failed", attempts=2, plan="o", error=MAX_ATTEMPTS_EXCEEDED)
    assert "after 2 of 5" in verdict([early], []).inconsistent[0]["why"]


def test_an_error_no_handler_raised_is_inconsistent() -> None:
    row = job("failed", error="the job's outcome could not be recorded: boom")
    result = verdict([row], run(row, 1, A, (10.0, 11.0), "ok"))
    assert "no handler raised" in result.inconsistent[0]["why"]


def test_cancelled_needs_a_cancellation_the_run_asked_for() -> None:
    row = job("cancelled", attempts=0)
    assert verdict([row], [], cancelled={row.id}).ok
    assert "no cancellation was requested" in verdict([row], []).inconsistent[0]["why"]


def test_an_execution_that_starts_after_its_job_finished_is_reported() -> None:
    row = job(finished_at=20.0)
    records = [*run(row, 1, A, (10.0, 11.0)), *run(row, 1, B, (21.5, 22.0))]
    result = verdict([row], records)
    assert [(late["pid"], late["after_s"]) for late in result.late_starts] == [(B, 1.5)]


def test_an_end_row_without_its_start_row_is_reported() -> None:
    row = job()
    records = run(row, 1, A, (10.0, 11.0))
    result = verdict([row], [records[1]])
    assert len(result.orphan_ends) == 1
    assert not result.ok


def test_a_rerun_after_a_success_whose_outcome_was_lost_is_legal_and_counted() -> None:
    row = job(attempts=2, finished_at=50.0)
    records = [*run(row, 1, A, (10.0, 11.0)), *run(row, 2, B, (30.0, 31.0))]
    result = verdict([row], records, Lifetimes(killed={A: 11.5}, exited={}, run_end=99.0))
    assert result.ok, result.as_dict()
    assert result.reruns_after_success == 1


def test_the_results_keep_every_count_and_a_bounded_sample() -> None:
    rows = [job("queued", attempts=0, finished_at=None) for _ in range(check.SAMPLES + 5)]
    document = verdict(rows, []).as_dict()
    assert document["violations"]["lost"] == check.SAMPLES + 5
    assert len(document["samples"]["lost"]) == check.SAMPLES
    assert document["ok"] is False
