"""Where a job is in its life, and the enumerations its record carries: :class:`Status` (and
the sets of statuses the rules use), :class:`CancelReason`, :class:`DedupScope`. Re-exported by
:mod:`jobs_core.domain`, the job model."""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """Where a job is in its life. The CHECK constraint of the ``jobs`` table lists these six.

    ``WAITING``: enqueued, but not claimable until the jobs it waits for have ended (its
    dependencies, a batch's members: :mod:`jobs_core.waits`); then ``QUEUED`` or ``CANCELLED``.
    """

    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_finished(self) -> bool:
        """True for the three terminal statuses."""
        return self in FINISHED


ACTIVE: frozenset[Status] = frozenset({Status.WAITING, Status.QUEUED, Status.RUNNING})
FINISHED: frozenset[Status] = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED})

ENDED_WITH_HOOK: frozenset[Status] = frozenset({Status.FAILED, Status.CANCELLED})
"""The endings that have an end hook (``on_fail``, ``on_cancel``; :mod:`jobs_core.hooks`)."""

HOOK_RETRY_S = 60.0
"""How long a hook taken by a worker is not taken by another (the worker ending a job is given
as long to run its hook before the others may): a hook whose worker died, or that raised, runs
again this much later (decision 0025)."""


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
