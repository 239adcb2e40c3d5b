"""Every attempt of a job, kept (issue 24): the one rule that turns the end of an attempt into
the record both stores keep.

The end of an attempt is a :class:`~jobs_core.domain.Patch` (decision 0020); :func:`record_of`
reads the attempt's record off it (its number, start, end, worker, what became of it, its error
and traceback). A store writes the record with the patch, in the same write and under the same
fence: a patch that does not apply (a stale attempt) records nothing. The records of a job are
deleted with it (a user's delete, retention).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from jobs_core.states import Status

if TYPE_CHECKING:
    from jobs_core.domain import Patch


class AttemptOutcome(enum.StrEnum):
    """What became of one attempt (not of the job: a retried attempt leaves the job queued).

    ``retrying``: it failed and the job will run again (its error is kept); ``snoozed``: the
    handler asked to run later; ``waiting``: the handler waits for its children (it runs again
    once they have ended); ``handed_back``: its worker shut down and gave the job back
    without counting the attempt; ``lost``: its worker went silent and the sweep ended it.
    """

    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETRYING = "retrying"
    SNOOZED = "snoozed"
    HANDED_BACK = "handed_back"
    LOST = "lost"
    WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a job, as both stores keep it (keyed by ``job_id`` and ``attempt``).

    ``attempt``: the n-th run of the job, numbered by the store in the order the runs ended
    (every run counts: a handed-back or snoozed one, and those before a user's retry, whose
    claim numbers restart; the job's ``attempts`` counts only what its retry budget spends).
    ``worker``: the worker process that ran it (``host:pid``), None when
    unknown (the sweep ends an attempt whose worker is gone). ``traceback``: the handler's
    frames (:mod:`jobs_core.tracebacks`), when the attempt raised.
    """

    job_id: uuid.UUID
    attempt: int
    started_at: datetime
    ended_at: datetime
    worker: str | None
    outcome: AttemptOutcome
    error: str | None
    traceback: str | None

    @property
    def duration_s(self) -> float:
        """How long the attempt ran, in seconds."""
        return (self.ended_at - self.started_at).total_seconds()


def outcome_of(change: Patch) -> AttemptOutcome:
    """What became of the attempt ``change`` ends."""
    if change.seen_at is not None:
        return AttemptOutcome.LOST
    if change.status is Status.QUEUED:
        held = change.ref.job
        if change.snoozes > held.snoozes:
            return AttemptOutcome.SNOOZED
        if change.attempts < held.attempts:
            return AttemptOutcome.HANDED_BACK
        return AttemptOutcome.RETRYING
    return _ENDED_AS[change.status]


_ENDED_AS = {
    Status.DONE: AttemptOutcome.DONE,
    Status.FAILED: AttemptOutcome.FAILED,
    Status.CANCELLED: AttemptOutcome.CANCELLED,
    Status.WAITING: AttemptOutcome.WAITING,  # its handler waits for its children (0043)
}
"""The outcome of an attempt that ended its job, or left it waiting for its children (a dict:
an enum's lookup by value cost a microsecond per finished job)."""


class Ended(NamedTuple):
    """An attempt that ended, as an observer counts it (:mod:`jobs_core.observe`): its job's
    type, what became of it and how long it ran. Only what the metrics read: a full
    :class:`AttemptRecord` per job cost the drain twice what the observer does with it."""

    type: str
    outcome: AttemptOutcome
    duration_s: float


def ended_of(change: Patch, job_type: str) -> Ended | None:
    """What an observer counts of the attempt ``change`` ends; None when :func:`record_of`
    records nothing."""
    started_at = change.ref.job.started_at
    if change.ended_at is None or started_at is None:
        return None
    return Ended(job_type, outcome_of(change), (change.ended_at - started_at).total_seconds())


def record_of(change: Patch, attempt: int) -> AttemptRecord | None:
    """The record of the attempt ``change`` ends, the job's ``attempt``-th; None for a patch
    not computed at the end of an attempt (no ``ended_at``) or of a job with no start."""
    held = change.ref.job
    if change.ended_at is None or held.started_at is None:
        return None
    traceback = change.report.get("traceback") if change.report is not None else None
    return AttemptRecord(
        job_id=change.ref.job_id,
        attempt=attempt,
        started_at=held.started_at,
        ended_at=change.ended_at,
        worker=change.worker,
        outcome=outcome_of(change),
        error=change.error,
        traceback=traceback if isinstance(traceback, str) else None,
    )
