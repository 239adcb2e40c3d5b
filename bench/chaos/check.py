"""The invariants of a chaos run, checked from the final ``jobs`` rows and the recorder's rows.

Pure functions of their inputs (no database, no clock), so each rule has tests of its own. The
rules, in the words of ``docs/chaos.md``:

1. **nothing lost**: every job enqueued ends ``done``, ``failed`` or ``cancelled``;
2. **no overlap**: two executions of one job never run at the same time. An execution runs from
   its ``start`` row to its ``end`` row; one without an ``end`` row ran until its worker was
   killed (the run knows when), or exited, or the run ended;
3. **attempts within bounds**: ``attempts <= max_attempts``, for the row and for every execution;
4. **statuses consistent with what the handlers saw**: ``done`` needs a successful ``end`` for
   the job's last attempt; ``failed`` needs that attempt's ``end`` to show the failure its error
   names (or, for the sweep's "max attempts exceeded", the last attempt allowed); ``cancelled``
   needs a cancellation the run requested;
5. **nothing runs after the end**: no execution starts after its job finished.

Also every ``end`` row has its ``start`` row (a recorder that lost rows would hide overlaps).
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs_core.domain import MAX_ATTEMPTS_EXCEEDED

from bench.chaos.jobtype import planned_kind

FINISHED = frozenset({"done", "failed", "cancelled"})

SAMPLES = 20
"""Examples of each violation kept in the results (the counts are complete)."""

_ERROR_KINDS = (
    ("ChaosRetryable:", "retry"),
    ("ChaosFailure:", "fail"),
    ("KeyError:", "raise"),
    ("handler returned list", "bad_return"),
)
"""The start of a failed job's error → the planned kind of its last attempt that explains it."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as the table has it at the end of the run (times are unix seconds)."""

    id: uuid.UUID
    status: str
    attempts: int
    max_attempts: int
    error: str | None
    finished_at: float | None
    plan: str


@dataclass(frozen=True, slots=True)
class RecordRow:
    """A row of ``chaos_executions``."""

    exec_id: uuid.UUID
    kind: str
    job_id: uuid.UUID
    attempt: int
    pid: int
    at: float
    planned_ms: int
    outcome: str


@dataclass(slots=True)
class Execution:
    """One execution of a handler: its ``start`` row joined to its ``end`` row, if any."""

    exec_id: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    pid: int
    start: float
    end: float | None
    planned: str
    outcome: str | None


@dataclass(frozen=True, slots=True)
class Lifetimes:
    """When each worker process stopped: killed by the run, or exited; and the run's end."""

    killed: Mapping[int, float]
    exited: Mapping[int, float]
    run_end: float

    def end_of(self, execution: Execution) -> float:
        """When ``execution`` stopped running: its ``end`` row, else its process's end."""
        if execution.end is not None:
            return execution.end
        return self.killed.get(execution.pid, self.exited.get(execution.pid, self.run_end))


@dataclass(slots=True)
class Verdict:
    """What the check found. ``ok`` when no invariant is broken."""

    jobs: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    executions: int = 0
    open_killed: int = 0
    open_unexplained: int = 0
    reruns_after_success: int = 0
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)
    overlaps: list[dict[str, Any]] = field(default_factory=list)
    over_attempts: list[dict[str, Any]] = field(default_factory=list)
    inconsistent: list[dict[str, Any]] = field(default_factory=list)
    late_starts: list[dict[str, Any]] = field(default_factory=list)
    orphan_ends: list[dict[str, Any]] = field(default_factory=list)
    overlap_seconds: float = 0.0

    VIOLATIONS = (
        "missing",
        "unexpected",
        "lost",
        "overlaps",
        "over_attempts",
        "inconsistent",
        "late_starts",
        "orphan_ends",
    )

    @property
    def ok(self) -> bool:
        """True when every invariant held."""
        return not any(getattr(self, name) for name in self.VIOLATIONS)

    def counts(self) -> dict[str, int]:
        """The number of each violation."""
        return {name: len(getattr(self, name)) for name in self.VIOLATIONS}

    def as_dict(self) -> dict[str, Any]:
        """Counts in full, samples of each violation (at most :data:`SAMPLES`)."""
        return {
            "ok": self.ok,
            "jobs": self.jobs,
            "statuses": dict(self.statuses),
            "executions": self.executions,
            "open_executions_killed": self.open_killed,
            "open_executions_unexplained": self.open_unexplained,
            "reruns_after_success": self.reruns_after_success,
            "overlap_seconds": round(self.overlap_seconds, 3),
            "violations": self.counts(),
            "samples": {
                name: getattr(self, name)[:SAMPLES]
                for name in self.VIOLATIONS
                if getattr(self, name)
            },
        }


def executions_of(records: Iterable[RecordRow]) -> tuple[list[Execution], list[RecordRow]]:
    """The executions the rows describe, and the ``end`` rows with no ``start`` row."""
    starts: dict[uuid.UUID, RecordRow] = {}
    ends: dict[uuid.UUID, RecordRow] = {}
    for row in records:
        (starts if row.kind == "start" else ends)[row.exec_id] = row
    executions = [
        Execution(
            exec_id=start.exec_id,
            job_id=start.job_id,
            attempt=start.attempt,
            pid=start.pid,
            start=start.at,
            end=ends[start.exec_id].at if start.exec_id in ends else None,
            planned=start.outcome,
            outcome=ends[start.exec_id].outcome if start.exec_id in ends else None,
        )
        for start in starts.values()
    ]
    orphans = [row for exec_id, row in ends.items() if exec_id not in starts]
    return executions, orphans


def find_overlaps(executions: list[Execution], lifetimes: Lifetimes) -> list[dict[str, Any]]:
    """Every pair of executions of one job that ran at the same time (one job's list)."""
    found = []
    ordered = sorted(executions, key=lambda e: e.start)
    for i, first in enumerate(ordered):
        first_end = lifetimes.end_of(first)
        for second in ordered[i + 1 :]:
            if second.start >= first_end:
                break
            found.append(
                {
                    "job_id": str(first.job_id),
                    "seconds": round(min(first_end, lifetimes.end_of(second)) - second.start, 3),
                    "first": _describe(first, lifetimes),
                    "second": _describe(second, lifetimes),
                }
            )
    return found


def _describe(execution: Execution, lifetimes: Lifetimes) -> dict[str, Any]:
    how = execution.outcome
    if how is None:
        how = "killed" if execution.pid in lifetimes.killed else "no end row"
    return {
        "attempt": execution.attempt,
        "pid": execution.pid,
        "start": round(execution.start, 3),
        "end": round(lifetimes.end_of(execution), 3),
        "outcome": how,
    }


def explain_status(job: JobRow, executions: list[Execution], cancel_requested: bool) -> str | None:
    """Why ``job``'s final status disagrees with what its handlers saw; None when it agrees."""
    last = [e for e in executions if e.attempt == job.attempts]
    ended = {e.outcome for e in last if e.outcome is not None}
    expected = planned_kind(job.plan, job.attempts) if job.attempts else None
    if job.status == "done":
        if "ok" not in ended:
            return f"done, but no successful end was recorded for attempt {job.attempts}"
        if expected != "ok":
            return f"done, but the plan says {expected} for attempt {job.attempts}"
        return None
    if job.status == "cancelled":
        return None if cancel_requested else "cancelled, but no cancellation was requested"
    if job.status != "failed":
        return None  # queued or running: counted as lost, not here
    error = job.error or ""
    if error.startswith(MAX_ATTEMPTS_EXCEEDED):
        if job.attempts < job.max_attempts:
            return f"failed as '{error}' after {job.attempts} of {job.max_attempts} attempts"
        return None
    for prefix, kind in _ERROR_KINDS:
        if error.startswith(prefix):
            if kind not in ended:
                return f"failed with '{error[:80]}' but attempt {job.attempts} ended {ended or '-'}"
            if kind == "retry" and job.attempts < job.max_attempts:
                return f"failed on a retryable error with attempts left ({job.attempts})"
            return None
    return f"failed with an error no handler raised: '{error[:200]}'"


def check(
    jobs: Iterable[JobRow],
    records: Iterable[RecordRow],
    *,
    enqueued: Iterable[uuid.UUID],
    cancel_requested: Iterable[uuid.UUID],
    lifetimes: Lifetimes,
) -> Verdict:
    """Check every invariant (see the module docstring)."""
    verdict = Verdict()
    rows = {job.id: job for job in jobs}
    expected = set(enqueued)
    cancels = set(cancel_requested)
    verdict.jobs = len(rows)
    verdict.statuses = dict(Counter(job.status for job in rows.values()))
    verdict.missing = sorted(str(i) for i in expected - rows.keys())
    verdict.unexpected = sorted(str(i) for i in rows.keys() - expected)
    executions, orphans = executions_of(records)
    verdict.executions = len(executions)
    verdict.orphan_ends = [
        {"exec_id": str(r.exec_id), "job_id": str(r.job_id), "pid": r.pid} for r in orphans
    ]
    by_job: dict[uuid.UUID, list[Execution]] = defaultdict(list)
    for execution in executions:
        by_job[execution.job_id].append(execution)
        if execution.end is None:
            if execution.pid in lifetimes.killed:
                verdict.open_killed += 1
            else:
                verdict.open_unexplained += 1
    for job in rows.values():
        runs = by_job.get(job.id, [])
        if job.status not in FINISHED:
            verdict.lost.append({"job_id": str(job.id), "status": job.status, "runs": len(runs)})
        worst = max([job.attempts, *(e.attempt for e in runs)])
        if worst > job.max_attempts:
            verdict.over_attempts.append(
                {"job_id": str(job.id), "attempts": worst, "max_attempts": job.max_attempts}
            )
        reason = explain_status(job, runs, job.id in cancels)
        if reason is not None:
            verdict.inconsistent.append(
                {"job_id": str(job.id), "status": job.status, "plan": job.plan, "why": reason}
            )
        if job.finished_at is not None:
            for run in runs:
                if run.start > job.finished_at:
                    verdict.late_starts.append(
                        {
                            "job_id": str(job.id),
                            "attempt": run.attempt,
                            "pid": run.pid,
                            "after_s": round(run.start - job.finished_at, 3),
                        }
                    )
        overlaps = find_overlaps(runs, lifetimes)
        verdict.overlaps += overlaps
        verdict.overlap_seconds += sum(max(0.0, o["seconds"]) for o in overlaps)
        successes = sorted(e.start for e in runs if e.outcome == "ok")
        if successes:
            verdict.reruns_after_success += sum(1 for e in runs if e.start > successes[0])
    return verdict
