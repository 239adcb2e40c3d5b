"""The ports of jobs-core: what the domain needs from the outside world, as Protocols.

Adapters (the in-memory store in :mod:`jobs_core.memory`, the PostgreSQL store in
``jobs_postgres``) implement them; one contract suite checks they behave the same.

Every time the store needs is passed in (``now``, ``stale_before``) from the :class:`Clock`, so a
test moves time with a fake clock on either adapter alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobs_core.domain import AttemptRef, Job, NewJob, Outcome, Status
from jobs_core.flow import ClaimLimits, FairTurn


class Clock(Protocol):
    """Tells the time (timezone-aware, UTC)."""

    def now(self) -> datetime:
        """The current instant."""
        ...


class Wakeup(Protocol):
    """Tells an idle worker that new work may be there (LISTEN/NOTIFY, or a condition)."""

    def wait(self, timeout: float) -> bool:
        """Block until a wake-up or ``timeout`` seconds; True if woken by a signal."""
        ...

    def close(self) -> None:
        """Stop listening and release resources."""
        ...


@dataclass(frozen=True, slots=True)
class JobFilter:
    """A page of an org's jobs, newest first: ``before`` is the keyset cursor
    ``(created_at, id)`` of the last job of the previous page."""

    statuses: frozenset[Status] | None = None
    type: str | None = None
    limit: int = 50
    before: tuple[datetime, uuid.UUID] | None = None


@dataclass(frozen=True, slots=True)
class WaitingFacts:
    """Counts the store reads for "why is this job waiting?".

    ``running_key``: running jobs of the job's type with its concurrency key; ``running_type``:
    running jobs of its type; ``ahead``: due queued jobs of its type a claim takes before it
    (capped at :data:`AHEAD_CAP`); ``live_workers``: live workers serving its type (None when
    the store keeps no worker registry).
    """

    running_key: int
    running_type: int
    ahead: int
    live_workers: int | None


AHEAD_CAP = 10_000
"""``WaitingFacts.ahead`` counts no further (an exact count of a huge queue costs a scan)."""


class JobStore(Protocol):
    """Where jobs live. Every method is atomic on its own.

    Worker writes (``heartbeat``, ``save_progress``, ``finish``) take the :class:`AttemptRef` of
    the claim and do nothing (False / None) when the job is no longer held by that attempt.
    Org-scoped reads and admin actions return None for a job that is absent *or* foreign.
    """

    # -- enqueue ------------------------------------------------------------------------------
    def insert(self, new: NewJob, now: datetime) -> Job | None:
        """Insert a queued job; None if its dedup key is held by another job of the org."""
        ...

    def insert_many(self, new: Sequence[NewJob], now: datetime) -> list[Job]:
        """Insert many jobs in one round trip; those whose key is held are skipped."""
        ...

    def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
        """The job of the org that holds ``dedup_key`` now, if any."""
        ...

    # -- worker -------------------------------------------------------------------------------
    def claim(
        self,
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: ClaimLimits | None = None,
        turn: FairTurn | None = None,
    ) -> list[Job]:
        """Take up to ``limit`` due queued jobs, highest priority then oldest first, no job to
        two claimers. With ``turn`` (and no ``limits``), in fair order between orgs
        (:func:`jobs_core.flow.fair_order`).

        With ``types``, only jobs of those types (a worker claims only what it can run). With
        ``limits``, only jobs that fit them (:func:`jobs_core.flow.admit`), counting every
        running job of every claimer: a job that does not fit is passed over, untouched.

        Each becomes running: ``attempts + 1``, ``started_at = now``, a new ``lease``, and its
        dedup key released if its scope is ``queue``.
        """
        ...

    def heartbeat(self, refs: Sequence[AttemptRef], now: datetime) -> set[uuid.UUID]:
        """Set ``progress.updated_at = now`` on held jobs; the ids still held."""
        ...

    def save_progress(
        self,
        ref: AttemptRef,
        progress: dict[str, Any],
        now: datetime,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool:
        """Replace the progress document of a held job and, if ``checkpoint`` is given, its
        private checkpoint, in one write; False if the lease is lost."""
        ...

    def checkpoint_of(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The private checkpoint of the job (never returned with a :class:`Job`), or None.
        Kept across attempts and a retry; gone with the job."""
        ...

    def cancel_requested(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        """The ids among held jobs whose cancellation has been requested."""
        ...

    def finish(
        self,
        ref: AttemptRef,
        outcome: Outcome,
        now: datetime,
        *,
        stale_before: datetime | None = None,
    ) -> Job | None:
        """Apply ``outcome`` to the held attempt (see :func:`jobs_core.domain.finish`).

        With ``stale_before`` (the sweep), only if the attempt showed no life since then.
        None when the attempt no longer holds the job (or is not stale).
        """
        ...

    def finish_many(
        self, outcomes: Sequence[tuple[AttemptRef, Outcome]], now: datetime
    ) -> list[Job | None]:
        """:meth:`finish` for many attempts in one round trip, results in the same order."""
        ...

    def finish_and_claim(
        self,
        outcomes: Sequence[tuple[AttemptRef, Outcome]],
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: ClaimLimits | None = None,
        turn: FairTurn | None = None,
    ) -> tuple[list[Job | None], list[Job]]:
        """:meth:`finish_many` of ``outcomes`` then :meth:`claim` of up to ``limit`` jobs, in
        one round trip: what a worker sends when a job ends while more work waits.

        A job re-queued by ``outcomes`` is not claimed back by the same call.
        """
        ...

    def find_stale(self, stale_before: datetime, limit: int) -> list[Job]:
        """Running jobs whose last sign of life is older than ``stale_before``."""
        ...

    def take_end_hooks(
        self, types: Sequence[str], limit: int, now: datetime, retry_at: datetime
    ) -> list[Job]:
        """Up to ``limit`` jobs of ``types`` whose end hook is due at ``now``, oldest due first,
        none to two callers (SKIP LOCKED); each is due again at ``retry_at`` unless
        :meth:`end_hooks_done` clears it first (:mod:`jobs_core.hooks`).

        Every write that ends a job ``failed`` or ``cancelled`` makes its hook due in the same
        statement: at ``now`` for an admin cancel of a queued job, at
        ``now + HOOK_RETRY_S`` for a worker's finish (the worker runs it at once); a retry
        clears it.
        """
        ...

    def end_hooks_done(self, jobs: Sequence[Job]) -> None:
        """Clear the due hook of each of ``jobs``, if the job still has the ending it had
        (same ``finished_at``): the hook of a later ending stays due."""
        ...

    def waiting_facts(self, job: Job, now: datetime) -> WaitingFacts:
        """What the store knows about why the queued ``job`` has not started (see
        :mod:`jobs_core.waiting`)."""
        ...

    # -- org-scoped reads and actions -----------------------------------------------------------
    def get(self, org_id: str, job_id: uuid.UUID) -> Job | None:
        """The org's job, or None."""
        ...

    def list_jobs(self, org_id: str, query: JobFilter) -> list[Job]:
        """The org's jobs matching ``query``, newest first."""
        ...

    def stats(self, org_id: str) -> dict[Status, int]:
        """Job count per status for the org (every status present, zero included)."""
        ...

    def cancel(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Queued → cancelled at once; running → cancellation requested.

        Raises :class:`~jobs_core.errors.InvalidTransition` for a finished job.
        """
        ...

    def retry(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Failed/cancelled → queued with attempts 0 and the originally requested dedup key.

        Raises ``InvalidTransition`` for another status, ``DedupConflict`` if the key is held.
        """
        ...

    def delete(self, org_id: str, job_id: uuid.UUID) -> bool:
        """Delete a finished job; False if absent. ``InvalidTransition`` if not finished."""
        ...
