"""The job model: statuses, the :class:`Job` record and its legal transitions as pure functions.

Every function here takes the current job and returns the next one, or raises
:class:`~jobs_core.errors.InvalidTransition`. Adapters either call these functions (the in-memory
store) or mirror them in one SQL statement (the PostgreSQL store); the contract suite checks that
both give the same result.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobs_core.errors import InvalidTransition


class Status(enum.StrEnum):
    """Where a job is in its life. The CHECK constraint of the ``jobs`` table lists these five."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_finished(self) -> bool:
        """True for the three terminal statuses."""
        return self in FINISHED


ACTIVE: frozenset[Status] = frozenset({Status.QUEUED, Status.RUNNING})
FINISHED: frozenset[Status] = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED})


class CancelReason(enum.StrEnum):
    """Why a running attempt was asked to stop (``JobContext.cancel_reason``).

    ``REQUESTED``: somebody cancelled the job (the API, the CLI, the panel); it ends
    ``cancelled``. ``TIMEOUT``: the attempt ran past its type's ``timeout_s``; it fails as a
    timeout (retried if the type says so). ``SHUTDOWN``: the worker is stopping and hands the job
    back to the queue, the attempt refunded. ``LEASE_LOST``: the worker could not prove its lease
    (the job was swept and taken by another attempt, or the worker's lease fence stopped it): this
    attempt's writes are refused, another attempt runs or will run the job.
    """

    REQUESTED = "requested"
    TIMEOUT = "timeout"
    SHUTDOWN = "shutdown"
    LEASE_LOST = "lease_lost"

    @property
    def message(self) -> str:
        """The default human-readable text of the reason."""
        return _CANCEL_MESSAGES[self]


_CANCEL_MESSAGES = {
    CancelReason.REQUESTED: "cancellation requested",
    CancelReason.TIMEOUT: "timed out",
    CancelReason.SHUTDOWN: "the worker shut down before the job finished",
    CancelReason.LEASE_LOST: "lease lost: the job was swept and taken by another attempt",
}


class DedupScope(enum.StrEnum):
    """When a job's dedup key is released (docs/contract.md §3).

    ``QUEUE``: at claim — the same work never piles up in the queue, yet can be enqueued again as
    soon as a run starts (no lost wake-up). ``ACTIVE``: when the job ends — never two active
    instances of the same work.
    """

    QUEUE = "queue"
    ACTIVE = "active"


MAX_ATTEMPTS_EXCEEDED = "max attempts exceeded"


@dataclass(frozen=True, slots=True)
class Job:
    """One row of the ``jobs`` table.

    ``lease`` is the fencing token of the current claim: a new random value at every claim, so a
    stale worker (whose job was swept and claimed again) can never write over the newer attempt.
    ``dedup_key`` is the key the job *holds* (unique per org, NULL once released);
    ``requested_dedup_key`` is the key it was enqueued with, kept for a manual retry.
    ``max_attempts`` and ``dedup_scope`` are copied from the job type at enqueue so the row is
    self-describing: a sweeper that does not know the type still applies the right rule.
    """

    id: uuid.UUID
    org_id: str
    type: str
    status: Status
    payload: Mapping[str, Any]
    created_at: datetime
    run_at: datetime
    attempts: int = 0
    max_attempts: int = 3
    dedup_scope: DedupScope = DedupScope.QUEUE
    dedup_key: str | None = None
    requested_dedup_key: str | None = None
    progress: Mapping[str, Any] | None = None
    report: Mapping[str, Any] | None = None
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    lease: uuid.UUID | None = None
    # -- flow control (docs/flow-control.md) --
    priority: int = 0
    concurrency_key: str | None = None
    snoozes: int = 0

    @property
    def ref(self) -> AttemptRef:
        """The handle of the current attempt; only valid while the job is running."""
        if self.lease is None:
            raise InvalidTransition(self.status, "refer to the attempt of")
        return AttemptRef(self.id, self.lease, self.attempts)

    @property
    def last_seen_at(self) -> datetime | None:
        """When the running attempt last showed life: its heartbeat, else its start (spec §2.5).

        The later of the two, so a checkpoint heartbeat left by an earlier attempt never makes a
        fresh attempt look stale.
        """
        beat = parse_heartbeat(self.progress)
        if beat is None:
            return self.started_at
        if self.started_at is None:
            return beat
        return max(beat, self.started_at)


@dataclass(frozen=True, slots=True)
class AttemptRef:
    """Which attempt of which job a worker holds: every write of a worker is conditional on it."""

    job_id: uuid.UUID
    lease: uuid.UUID
    attempt: int


@dataclass(frozen=True, slots=True)
class NewJob:
    """What an enqueue asks for; the job type's declarations are already resolved into it."""

    org_id: str
    type: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    dedup_key: str | None = None
    dedup_scope: DedupScope = DedupScope.QUEUE
    max_attempts: int = 3
    run_at: datetime | None = None
    priority: int = 0
    concurrency_key: str | None = None


PRIORITY_MIN = -100
PRIORITY_MAX = 100
"""The range of ``priority`` (default 0; higher runs first; docs/flow-control.md)."""


def claim_order(job: Job) -> tuple[int, datetime, uuid.UUID]:
    """The order a claim takes due jobs in: higher priority first, then oldest first."""
    return (-job.priority, job.created_at, job.id)


# ---- outcomes of an attempt -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """The handler returned: the job is done with this report."""

    report: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed definitively: short ``error``, details in ``report``."""

    error: str
    report: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The handler stopped on a cancellation request."""

    report: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Requeue:
    """Put the job back in the queue to run again at ``run_at`` (retryable error, or sweep).

    ``refund_attempt``: the attempt is handed back unfinished by a worker that is shutting down,
    so it does not count against ``max_attempts`` (``attempts`` goes back down by one).
    ``snooze``: the handler asked to run again later (an upstream said "not now"); the attempt is
    refunded and ``snoozes`` counts one more.
    """

    run_at: datetime
    error: str | None = None
    report: Mapping[str, Any] | None = None
    refund_attempt: bool = False
    snooze: bool = False


Outcome = Done | Failed | Cancelled | Requeue


def heartbeat_progress(progress: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """``progress`` with its conventional ``updated_at`` key set to ``now``."""
    merged = dict(progress or {})
    merged["updated_at"] = now.isoformat()
    return merged


def parse_heartbeat(progress: Mapping[str, Any] | None) -> datetime | None:
    """The ``updated_at`` of a progress document, if it holds a valid timestamp."""
    if not progress:
        return None
    raw = progress.get("updated_at")
    if not isinstance(raw, str):
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


# ---- transitions ------------------------------------------------------------------------------


def new_job(spec: NewJob, job_id: uuid.UUID, now: datetime) -> Job:
    """The row an enqueue inserts."""
    return Job(
        id=job_id,
        org_id=spec.org_id,
        type=spec.type,
        status=Status.QUEUED,
        payload=dict(spec.payload),
        created_at=now,
        run_at=spec.run_at or now,
        max_attempts=spec.max_attempts,
        dedup_scope=spec.dedup_scope,
        dedup_key=spec.dedup_key,
        requested_dedup_key=spec.dedup_key,
        priority=spec.priority,
        concurrency_key=spec.concurrency_key,
    )


def new_jobs(specs: Iterable[NewJob], ids: Iterable[uuid.UUID], now: datetime) -> list[Job]:
    """:func:`new_job` of each spec with the id at the same position (as many of each).

    The same rows, built positionally: a bulk enqueue makes one per job, where the keyword
    arguments showed in the profiles."""
    queued = Status.QUEUED
    return [
        Job(
            job_id,
            spec.org_id,
            spec.type,
            queued,
            dict(spec.payload),
            now,
            spec.run_at or now,
            0,
            spec.max_attempts,
            spec.dedup_scope,
            spec.dedup_key,
            spec.dedup_key,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            spec.priority,
            spec.concurrency_key,
        )
        for spec, job_id in zip(specs, ids, strict=True)
    ]


def claim(job: Job, lease: uuid.UUID, now: datetime) -> Job:
    """``queued`` → ``running``: one more attempt; a ``queue``-scope key is released here."""
    if job.status is not Status.QUEUED:
        raise InvalidTransition(job.status, "claim")
    return dataclasses.replace(
        job,
        status=Status.RUNNING,
        attempts=job.attempts + 1,
        started_at=now,
        lease=lease,
        dedup_key=None if job.dedup_scope is DedupScope.QUEUE else job.dedup_key,
    )


def finish(job: Job, outcome: Outcome, now: datetime) -> Job:
    """Apply the outcome of the running attempt.

    Terminal outcomes release the dedup key. A requeue keeps whatever key the job still holds:
    for ``queue`` scope it was released at claim and a newer job may hold it now, so the job
    stays keyless; for ``active`` scope it was never released.
    """
    if job.status is not Status.RUNNING:
        raise InvalidTransition(job.status, "finish")
    if isinstance(outcome, Requeue):
        return dataclasses.replace(
            job,
            status=Status.QUEUED,
            attempts=(
                max(0, job.attempts - 1)
                if outcome.refund_attempt or outcome.snooze
                else job.attempts
            ),
            snoozes=job.snoozes + 1 if outcome.snooze else job.snoozes,
            run_at=outcome.run_at,
            error=outcome.error,
            report=outcome.report if outcome.report is not None else job.report,
            lease=None,
            cancel_requested_at=None,
        )
    status, error = {
        Done: (Status.DONE, None),
        Cancelled: (Status.CANCELLED, "cancelled"),
    }.get(type(outcome), (Status.FAILED, None))
    if isinstance(outcome, Failed):
        error = outcome.error
    return dataclasses.replace(
        job,
        status=status,
        report=outcome.report,
        error=error,
        finished_at=now,
        dedup_key=None,
        lease=None,
    )


def cancel_queued(job: Job, now: datetime) -> Job:
    """``queued`` → ``cancelled`` at once; the key is released."""
    if job.status is not Status.QUEUED:
        raise InvalidTransition(job.status, "cancel")
    return dataclasses.replace(
        job,
        status=Status.CANCELLED,
        error="cancelled",
        finished_at=now,
        dedup_key=None,
        cancel_requested_at=now,
    )


def request_cancel(job: Job, now: datetime) -> Job:
    """Ask the running attempt to stop; its worker sees it through the handler's context."""
    if job.status is not Status.RUNNING:
        raise InvalidTransition(job.status, "request cancellation of")
    if job.cancel_requested_at is not None:
        return job
    return dataclasses.replace(job, cancel_requested_at=now)


def retry(job: Job, now: datetime) -> Job:
    """``failed``/``cancelled`` → ``queued`` with a fresh attempt budget and its original key.

    The store must refuse it (:class:`~jobs_core.errors.DedupConflict`) when another job holds
    that key now.
    """
    if job.status not in (Status.FAILED, Status.CANCELLED):
        raise InvalidTransition(job.status, "retry")
    return dataclasses.replace(
        job,
        status=Status.QUEUED,
        attempts=0,
        snoozes=0,
        run_at=now,
        dedup_key=job.requested_dedup_key,
        error=None,
        started_at=None,
        finished_at=None,
        cancel_requested_at=None,
        lease=None,
    )


def check_deletable(job: Job) -> None:
    """Only a finished job may be deleted."""
    if not job.status.is_finished:
        raise InvalidTransition(job.status, "delete")


def is_stale(job: Job, stale_before: datetime) -> bool:
    """A running job whose last sign of life is older than ``stale_before`` is a zombie."""
    seen = job.last_seen_at
    return job.status is Status.RUNNING and seen is not None and seen < stale_before


def sweep_outcome(job: Job, now: datetime) -> Outcome:
    """What the sweep does with a zombie (docs/contract.md §5).

    While ``attempts < max_attempts`` it goes back to the queue (the next claim counts the next
    attempt); otherwise it fails for good. A zombie whose cancellation was requested is not run
    again: it ends cancelled.
    """
    if job.cancel_requested_at is not None:
        return Cancelled(report={"reason": "cancellation requested; its worker was lost"})
    if job.attempts < job.max_attempts:
        return Requeue(run_at=now, error=None)
    return Failed(error=MAX_ATTEMPTS_EXCEEDED, report={"reason": "worker lost", **_attempts(job)})


def _attempts(job: Job) -> dict[str, Any]:
    return {"attempts": job.attempts, "max_attempts": job.max_attempts}
