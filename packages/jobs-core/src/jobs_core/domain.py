"""The job model: the :class:`Job` record and its legal transitions as pure functions (its
statuses in :mod:`jobs_core.states`, the outcomes of an attempt in :mod:`jobs_core.outcomes`,
both re-exported here).

Every function here takes the current job and returns the next one, or raises
:class:`~jobs_core.errors.InvalidTransition`. The end of an attempt is also given as data: a
:class:`Patch`, the columns the outcome writes, computed once here from the held job and its
outcome; both stores assign those columns under the lease fence (the in-memory store with
:func:`apply`, the PostgreSQL store in one ``UPDATE``), so neither re-derives the rule
(decision 0020). The contract suite checks that both give the same result.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobs_core import parents
from jobs_core.errors import InvalidTransition
from jobs_core.outcomes import Cancelled as Cancelled
from jobs_core.outcomes import Done as Done
from jobs_core.outcomes import Failed as Failed
from jobs_core.outcomes import Outcome as Outcome
from jobs_core.outcomes import Requeue as Requeue
from jobs_core.outcomes import Wait as Wait
from jobs_core.outcomes import heartbeat_progress as heartbeat_progress
from jobs_core.outcomes import parse_heartbeat as parse_heartbeat
from jobs_core.states import ACTIVE as ACTIVE
from jobs_core.states import ENDED_WITH_HOOK as ENDED_WITH_HOOK
from jobs_core.states import FINISHED as FINISHED
from jobs_core.states import HOOK_RETRY_S as HOOK_RETRY_S
from jobs_core.states import CancelReason as CancelReason
from jobs_core.states import DedupScope as DedupScope
from jobs_core.states import Status as Status

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
    # -- the sweep (docs/contract.md §5; decision 0020) --
    heartbeat_at: datetime | None = None
    # -- jobs that make jobs (docs/handlers.md, "Children"; decision 0038) --
    parent_id: uuid.UUID | None = None
    """The job whose handler enqueued this one (``ctx.enqueue``), None for any other enqueue."""
    trace_context: Mapping[str, str] | None = None
    """Its enqueue's trace context (W3C ``traceparent``...; :mod:`jobs_core.tracing`) or None."""

    @property
    def ref(self) -> AttemptRef:
        """The handle of the current attempt; only valid while the job is running."""
        if self.lease is None:
            raise InvalidTransition(self.status, "refer to the attempt of")
        return AttemptRef(self.id, self.lease, self.attempts, self)

    @property
    def last_seen_at(self) -> datetime | None:
        """When the running attempt last showed life (docs/contract.md §5): its heartbeat.

        The claim sets ``heartbeat_at`` to its start, so an earlier attempt's heartbeat never
        makes a fresh attempt look stale; a job built without one falls back to its start.
        """
        return self.heartbeat_at if self.heartbeat_at is not None else self.started_at


@dataclass(frozen=True, slots=True)
class AttemptRef:
    """Which attempt of which job a worker holds: every write of a worker is conditional on it.

    ``job`` is the job as that attempt holds it (as claimed, or as read by the sweep): the
    outcome's :class:`Patch` is computed from it. It takes no part in equality or hashing.
    """

    job_id: uuid.UUID
    lease: uuid.UUID
    attempt: int
    job: Job = field(compare=False, repr=False)


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
    parent_id: uuid.UUID | None = None
    """Set by ``ctx.enqueue`` only: the running job that enqueues this one (same org)."""
    trace_context: Mapping[str, str] | None = None
    """Set by a :class:`jobs_core.tracing.Tracer` when tracing is on."""


PRIORITY_MIN = -100
PRIORITY_MAX = 100
"""The range of ``priority`` (default 0; higher runs first; docs/flow-control.md)."""


def claim_order(job: Job) -> tuple[int, datetime, uuid.UUID]:
    """The order a claim takes due jobs in: higher priority first, then oldest first."""
    return (-job.priority, job.created_at, job.id)


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
        parent_id=spec.parent_id,
        trace_context=spec.trace_context,
    )


def new_jobs(specs: Iterable[NewJob], ids: Iterable[uuid.UUID], now: datetime) -> list[Job]:
    """:func:`new_job` of each spec with the id at the same position, built positionally (a
    bulk enqueue makes one per job, where the keyword arguments showed in the profiles)."""
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
            0,
            None,
            spec.parent_id,
            spec.trace_context,
        )
        for spec, job_id in zip(specs, ids, strict=True)
    ]


def claim(job: Job, lease: uuid.UUID, now: datetime) -> Job:
    """``queued`` → ``running``: one more attempt; a ``queue``-scope key is released here.

    The claim is the one transition whose rows the database picks (``FOR UPDATE SKIP LOCKED``),
    so the PostgreSQL store applies this rule in its claim statement to rows it has not sent
    back yet; the contract suite checks every claimed row against this function.
    """
    if job.status is not Status.QUEUED:
        raise InvalidTransition(job.status, "claim")
    return dataclasses.replace(
        job,
        status=Status.RUNNING,
        attempts=job.attempts + 1,
        started_at=now,
        heartbeat_at=now,
        lease=lease,
        dedup_key=None if job.dedup_scope is DedupScope.QUEUE else job.dedup_key,
    )


def heartbeat(job: Job, now: datetime) -> Job:
    """The running attempt shows life: ``heartbeat_at`` and ``progress.updated_at`` are ``now``."""
    return dataclasses.replace(
        job, heartbeat_at=now, progress=heartbeat_progress(job.progress, now)
    )


def save_progress(job: Job, progress: Mapping[str, Any], now: datetime) -> Job:
    """The handler's progress document replaces the job's; saving it is a heartbeat too."""
    return dataclasses.replace(job, heartbeat_at=now, progress=heartbeat_progress(progress, now))


@dataclass(frozen=True, slots=True)
class Patch:
    """The end of an attempt as data: the columns its outcome writes (decision 0020).

    Computed once, by :func:`patch`, from the job as the attempt holds it and its outcome;
    a store assigns each column as given to the row held by ``ref`` (its id, its lease, still
    ``running``) and clears the lease. Under a held lease the row changes only in its progress,
    its heartbeat and its cancellation request, so every other column the held job shows is
    the row's. A patch never writes the cancellation request: made during the attempt, it
    outlives it, so a job re-queued is then cancelled (:func:`cancel_now`), never run again.

    ``seen_at``: the sweep's fence. Set, the patch applies only if the row's ``heartbeat_at`` is
    still that instant: an attempt that showed life since the sweep read it is left alone.

    ``hook_due_at``: the durable marker of the end hook (:func:`end_hook_due`), a private column
    of the row (not a field of :class:`Job`) that the store assigns with the others, in the same
    write: set for an end ``failed`` or ``cancelled``, None otherwise (decision 0025).

    ``ended_at`` and ``worker``: when the attempt ended and which worker ran it, for the
    attempt's record (:func:`jobs_core.history.record_of`) a store writes with the patch.
    """

    ref: AttemptRef
    status: Status
    attempts: int
    snoozes: int
    run_at: datetime
    error: str | None
    report: Mapping[str, Any] | None
    finished_at: datetime | None
    dedup_key: str | None
    seen_at: datetime | None = None
    hook_due_at: datetime | None = None
    ended_at: datetime | None = None
    worker: str | None = None
    children: tuple[NewJob, ...] = ()
    """The jobs the handler enqueued with ``ctx.enqueue`` (:attr:`Done.children`): inserted by
    the store in the same write as the patch, only if the patch applies
    (:func:`jobs_core.children.children_due`)."""
    awaits: tuple[uuid.UUID, ...] = ()  # a Wait's children enqueued at once (decision 0043)


def patch(
    ref: AttemptRef,
    outcome: Outcome,
    now: datetime,
    *,
    seen_at: datetime | None = None,
    worker: str | None = None,
) -> Patch:
    """The columns ``outcome`` writes to the attempt ``ref`` holds.

    Terminal outcomes release the dedup key. A requeue keeps whatever key the job still holds:
    for ``queue`` scope it was released at claim and a newer job may hold it now, so the job
    stays keyless; for ``active`` scope it was never released. A requeue without a report keeps
    the job's; a refunded attempt (a hand-back), a snooze or a :class:`Wait` does not count.
    """
    job = ref.job
    if isinstance(outcome, Requeue):
        refunded = outcome.refund_attempt or outcome.snooze
        return Patch(
            ref=ref,
            status=Status.QUEUED,
            attempts=max(0, job.attempts - 1) if refunded else job.attempts,
            snoozes=job.snoozes + 1 if outcome.snooze else job.snoozes,
            run_at=outcome.run_at,
            error=outcome.error,
            report=outcome.report if outcome.report is not None else job.report,
            finished_at=job.finished_at,
            dedup_key=job.dedup_key,
            seen_at=seen_at,
            ended_at=now,
            worker=worker,
        )
    if isinstance(outcome, Wait):
        return parents.wait_patch(ref, outcome, now, worker)
    if isinstance(outcome, Done):
        status, error = Status.DONE, None
    elif isinstance(outcome, Cancelled):
        status, error = Status.CANCELLED, "cancelled"
    else:
        status, error = Status.FAILED, outcome.error
    return Patch(
        ref=ref,
        status=status,
        attempts=job.attempts,
        snoozes=job.snoozes,
        run_at=job.run_at,
        error=error,
        report=outcome.report,
        finished_at=now,
        dedup_key=None,
        seen_at=seen_at,
        hook_due_at=end_hook_due(status, now, by_worker=True),
        ended_at=now,
        worker=worker,
        children=outcome.children if isinstance(outcome, Done) else (),
    )


def cancel_now(job: Job | None) -> bool:
    """Whether ``job``, as a write of a patch just left it (never running: re-queued by a retry, a
    snooze, a hand-back, or waiting for its children), must be cancelled at once (:func:`cancel`):
    a request made during its attempt outlives it, a patch never clears it (contract.md §6)."""
    return job is not None and job.status in ACTIVE and job.cancel_requested_at is not None


def end_hook_due(status: Status, now: datetime, *, by_worker: bool) -> datetime | None:
    """When the end hook of a job a write leaves in ``status`` is due (decision 0025): the
    value of the row's private ``hook_due_at`` that write assigns.

    None when ``status`` has no hook (a re-queue, a retry, a cancellation request: a pending
    marker is cleared). For ``failed`` or ``cancelled``: ``now + HOOK_RETRY_S`` when a worker
    ended the job (``by_worker``: the worker's attempt, or its sweep), since that worker runs
    the hook at once and the others' hook passes must not race it; ``now`` when no worker did
    (an admin cancel of a queued job), so the next pass of any worker runs it.
    """
    if status not in ENDED_WITH_HOOK:
        return None
    return now + timedelta(seconds=HOOK_RETRY_S) if by_worker else now


def apply(job: Job, change: Patch) -> Job:
    """``job`` with ``change`` written: what a store does to the held row (its lease cleared)."""
    return dataclasses.replace(
        job,
        status=change.status,
        attempts=change.attempts,
        snoozes=change.snoozes,
        run_at=change.run_at,
        error=change.error,
        report=change.report,
        finished_at=change.finished_at,
        dedup_key=change.dedup_key,
        lease=None,
    )


def applies(job: Job | None, change: Patch) -> bool:
    """Whether ``change`` may be written to ``job``: the fence of every worker write (the
    attempt still holds the job) and, for the sweep, no sign of life since it read the job."""
    return (
        job is not None
        and job.status is Status.RUNNING
        and job.lease == change.ref.lease
        and (change.seen_at is None or job.heartbeat_at == change.seen_at)
    )


def finish(job: Job, outcome: Outcome, now: datetime) -> Job:
    """Apply the outcome of the running attempt (:func:`patch`, then :func:`apply`)."""
    if job.status is not Status.RUNNING:
        raise InvalidTransition(job.status, "finish")
    return apply(job, patch(job.ref, outcome, now))


def cancel_queued(job: Job, now: datetime) -> Job:
    """``queued`` (or ``waiting``) → ``cancelled`` at once; the key is released."""
    if job.status is not Status.QUEUED and job.status is not Status.WAITING:
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


def cancel(job: Job, now: datetime) -> Job:
    """Cancel now or ask for it: a ``queued`` or ``waiting`` job is cancelled at once, a
    ``running`` one gets a request (the same job back if one was already made); a finished job
    cannot be cancelled."""
    if job.status is Status.QUEUED or job.status is Status.WAITING:
        return cancel_queued(job, now)
    if job.status is Status.RUNNING:
        return request_cancel(job, now)
    raise InvalidTransition(job.status, "cancel")


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


def sweep_patch(job: Job, now: datetime) -> Patch:
    """The sweep's write for the zombie ``job`` as read: :func:`sweep_outcome`, fenced on the
    heartbeat it read (a sweeper racing a late heartbeat, or another sweeper, writes nothing)."""
    return patch(job.ref, sweep_outcome(job, now), now, seen_at=job.heartbeat_at)


HANDED_BACK_CANCELLED = "cancellation requested; the worker shut down before the handler stopped"


def hand_back_outcome(job: Job, now: datetime, *, cancel_requested: bool) -> Outcome:
    """What a worker that shuts down does with an attempt still running (docs/contract.md §4).

    The rule of the sweep for a lost worker, except that the worker is there to say so: the
    attempt goes back to the queue without counting (it did not fail), and an attempt whose
    cancellation was requested (seen by the worker, or ``job``'s own request) ends cancelled.
    """
    if cancel_requested or job.cancel_requested_at is not None:
        return Cancelled(report={"reason": HANDED_BACK_CANCELLED})
    return Requeue(run_at=now, refund_attempt=True)


def _attempts(job: Job) -> dict[str, Any]:
    return {"attempts": job.attempts, "max_attempts": job.max_attempts}
