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
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from jobs_core.workers import WorkerRegistry

if TYPE_CHECKING:  # the ports' signatures only: a reader of JobFilter imports none of these
    from jobs_core.domain import AttemptRef, Job, NewJob, Patch, Status
    from jobs_core.flow import ClaimLimits, FairTurn
    from jobs_core.history import AttemptRecord
    from jobs_core.listing import ChildCounts
    from jobs_core.overview import BucketFacts, Window
    from jobs_core.pauses import TypePause
    from jobs_core.waits import Awaited, Release, WaitRule


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
    field_bytes: int | None = None
    """Payloads, progress and reports whose JSON text is larger come back as
    :class:`jobs_core.listing.Elided` (None: every value whole)."""
    parent_id: uuid.UUID | None = None
    """Only the children of this job (those whose ``parent_id`` it is: ``ctx.enqueue``)."""


@dataclass(frozen=True, slots=True)
class WaitingFacts:
    """Counts the store reads for "why is this job waiting?".

    ``running_key``: running jobs of the job's type with its concurrency key; ``running_type``:
    running jobs of its type; ``ahead``: due queued jobs of its type a claim takes before it
    (capped at :data:`AHEAD_CAP`); ``live_workers``: live workers serving its type (every
    store keeps the worker registry, :class:`~jobs_core.workers.WorkerRegistry`);
    ``type_paused``: an operator paused its type (:class:`TypePauses`); ``rate_starts``: the
    recorded starts of its key (newest first) if its type has a rate limit
    (:mod:`jobs_core.rates`).
    """

    running_key: int
    running_type: int
    ahead: int
    live_workers: int
    type_paused: bool = False
    rate_starts: tuple[datetime, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimNext:
    """A claim sent with a batch of outcomes (:meth:`JobStore.complete`): the arguments of
    :meth:`JobStore.claim`."""

    limit: int
    now: datetime
    types: Sequence[str] | None = None
    limits: ClaimLimits | None = None
    turn: FairTurn | None = None


class Completed(NamedTuple):
    """What :meth:`JobStore.complete` did: each patch's job as written (None when its attempt
    no longer held the job, or the sweep's fence held), in input order; the jobs claimed."""

    finished: list[Job | None]
    claimed: list[Job]


AHEAD_CAP = 10_000
"""``WaitingFacts.ahead`` counts no further (an exact count of a huge queue costs a scan)."""


class Enqueueing(Protocol):
    """New jobs and the dedup keys they hold (docs/contract.md §2): what every enqueue path
    (:meth:`jobs_core.JobService.enqueue`, ``enqueue_many``, a schedule's tick) writes.
    Contract: ``jobs_contract.enqueue``."""

    def insert(self, new: NewJob, now: datetime) -> Job | None:
        """Insert a queued job; None if its dedup key is held by another job of the org."""
        ...

    def insert_many(self, new: Sequence[NewJob], now: datetime) -> list[Job]:
        """Insert many jobs in one round trip; those whose key is held are skipped."""
        ...

    def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
        """The job of the org that holds ``dedup_key`` now, if any."""
        ...


class Attempts(Protocol):
    """A worker's attempts, the hot path: the claim, the writes of a held job, and the end of
    attempts (decisions 0027, 0028).

    The writes (``heartbeat``, ``save_progress``, ``complete``) take the :class:`AttemptRef` of
    the claim and do nothing (False / None) when the job is no longer held by that attempt.
    Contract: ``jobs_contract.attempts``, ``fair_claim``, ``flow_control``, ``transitions``,
    ``checkpoint``."""

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
        two claimers: the jobs :func:`jobs_core.claims.choose` picks for the plan of these
        arguments (decision 0027). With ``turn``, in fair order between orgs
        (:func:`jobs_core.flow.fair_order`), with or without ``limits``.

        Never a job of a paused type (:class:`TypePauses`): it stays queued, untouched.
        With ``types``, only jobs of those types (a worker claims only what it can run). With
        ``limits``, only jobs that fit them (:func:`jobs_core.flow.admit`), counting every
        running job of every claimer: a job that does not fit is passed over, untouched.

        Each becomes running: ``attempts + 1``, ``started_at = now``, a new ``lease``, and its
        dedup key released if its scope is ``queue``.
        """
        ...

    def heartbeat(self, refs: Sequence[AttemptRef], now: datetime) -> set[uuid.UUID]:
        """:func:`jobs_core.domain.heartbeat` on held jobs (``heartbeat_at`` and
        ``progress.updated_at`` set to ``now``); the ids still held."""
        ...

    def save_progress(
        self,
        ref: AttemptRef,
        progress: dict[str, Any],
        now: datetime,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool:
        """:func:`jobs_core.domain.save_progress` on a held job and, if ``checkpoint`` is given,
        its private checkpoint, in one write; False if the lease is lost."""
        ...

    def checkpoint_of(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The private checkpoint of the job (never returned with a :class:`Job`), or None.
        Kept across attempts and a retry; gone with the job."""
        ...

    def cancel_requested(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        """The ids among held jobs whose cancellation has been requested."""
        ...

    def complete(
        self, patches: Sequence[Patch], *, claim_next: ClaimNext | None = None
    ) -> Completed:
        """Write the end of attempts, in one round trip: the one way to write an outcome.

        Each :class:`~jobs_core.domain.Patch` (computed by :func:`jobs_core.domain.patch`) is
        assigned as given to the row its ``ref`` holds (:func:`jobs_core.domain.apply`), only if
        the attempt still holds it and, with ``seen_at`` (the sweep), its heartbeat is still
        that one (:func:`jobs_core.domain.applies`). The same attempt twice: the first wins.

        With ``claim_next``, then :meth:`claim` with its arguments, in the same round trip:
        what a worker sends when a job ends while more work waits. A job re-queued by these
        patches is not claimed back by the same call. A patch's ``hook_due_at`` (the end hook's
        marker, decision 0025) is assigned with its other columns, in the same write; so are
        the children it owes (:func:`jobs_core.children.children_due`, decision 0038) and, for
        a patch that leaves its job ``waiting``, the job's edges to them and to its ``awaits``,
        released at once if they have all ended (:mod:`jobs_core.parents`, decision 0043).
        """
        ...


class Recovery(Protocol):
    """What is owed after attempts ended without their worker: the jobs of lost workers (the
    sweep, docs/contract.md §5) and the end hooks due (decision 0025). The worker's sweeper and
    hooks pass call these through :class:`jobs_core.JobService`. Contract:
    ``jobs_contract.sweep``, ``end_hooks``."""

    def find_stale(self, stale_before: datetime, limit: int) -> list[Job]:
        """Running jobs whose last sign of life (``heartbeat_at``, :attr:`Job.last_seen_at`) is
        older than ``stale_before``."""
        ...

    def take_end_hooks(
        self, types: Sequence[str], limit: int, now: datetime, retry_at: datetime
    ) -> list[Job]:
        """Up to ``limit`` jobs of ``types`` whose end hook is due at ``now``, oldest due first,
        none to two callers (SKIP LOCKED); each is due again at ``retry_at`` unless
        :meth:`end_hooks_done` clears it first (:mod:`jobs_core.hooks`).

        Every write that ends a job ``failed`` or ``cancelled`` makes its hook due in the same
        statement, at the instant the core gives (:func:`jobs_core.domain.end_hook_due`): a
        :class:`Patch`'s ``hook_due_at`` for :meth:`complete` (``now + HOOK_RETRY_S``: the
        worker runs it at once), ``now`` for :meth:`cancel` of a queued job; :meth:`retry`
        clears it.
        """
        ...

    def end_hooks_done(self, jobs: Sequence[Job]) -> None:
        """Clear the due hook of each of ``jobs``, if the job still has the ending it had
        (same ``finished_at``): the hook of a later ending stays due."""
        ...


class OrgJobs(Protocol):
    """An org's jobs: the reads and the admin actions of the API, the panel and the CLI.

    Scoped to the org: None for a job that is absent *or* foreign. Contract:
    ``jobs_contract.org_jobs`` (and ``flow_control`` for :meth:`waiting_facts`)."""

    def get(self, org_id: str, job_id: uuid.UUID) -> Job | None:
        """The org's job, or None."""
        ...

    def list_jobs(self, org_id: str, query: JobFilter) -> list[Job]:
        """The org's jobs matching ``query``, newest first."""
        ...

    def stats(self, org_id: str) -> dict[Status, int]:
        """Job count per status for the org (every status present, zero included)."""
        ...

    def waiting_facts(self, job: Job, now: datetime) -> WaitingFacts:
        """What the store knows about why the queued ``job`` has not started (see
        :mod:`jobs_core.waiting`)."""
        ...

    def cancel(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """:func:`jobs_core.domain.cancel` of the locked row: queued → cancelled at once (its end
        hook due at once, :func:`jobs_core.domain.end_hook_due`, in the same write); running →
        cancellation requested.

        Raises :class:`~jobs_core.errors.InvalidTransition` for a finished job.
        """
        ...

    def retry(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Failed/cancelled → queued with attempts 0 and the originally requested dedup key; a
        pending end hook is cleared (the job is live again).

        Raises ``InvalidTransition`` for another status, ``DedupConflict`` if the key is held.
        """
        ...

    def delete(self, org_id: str, job_id: uuid.UUID) -> bool:
        """Delete a finished job (its private checkpoint, pending end hook and attempt records
        with it); False if absent. ``InvalidTransition`` if not finished."""
        ...


class History(Protocol):
    """Every attempt of a job, kept (:mod:`jobs_core.history`, issue 24). Contract:
    ``jobs_contract.history``."""

    def attempts(self, org_id: str, job_id: uuid.UUID) -> list[AttemptRecord]:
        """The records of the org's job's attempts (:mod:`jobs_core.history`), oldest first;
        empty for a job that is absent or foreign. Written by :meth:`Attempts.complete` with
        each patch that applies, gone with the job (a delete, retention)."""
        ...


class OperatorReads(Protocol):
    """The only reads across orgs: an operator at a terminal on the database (the CLI: ``jobs
    ls`` without ``--org``, ``jobs show ID``), never a tenant over HTTP; over HTTP only the
    counts of :meth:`active_counts`, to an operator's token (``GET /metrics``). Contract:
    ``jobs_contract.operator_reads``."""

    def get_any_org(self, job_id: uuid.UUID) -> Job | None:
        """The job with this id, whichever org owns it; None if there is none."""
        ...

    def list_all_orgs(self, query: JobFilter) -> list[Job]:
        """The jobs of every org matching ``query``, newest first, in one read (``before`` is
        the same keyset cursor as in :meth:`list_jobs`)."""
        ...

    def active_counts(self, now: datetime) -> dict[tuple[str, str], int]:
        """The live jobs of every org counted by type and state
        (:func:`jobs_core.observe.active_state` at ``now``), in one read that walks the live
        jobs only, never the history; a pair with no job is absent."""
        ...


class TypePauses(Protocol):
    """Paused job types (:mod:`jobs_core.pauses`): global, every org's jobs of a paused type
    stay queued and no claim takes them until it is resumed. Contract: ``jobs_contract.pauses``
    (and ``flow_control`` for the reason a job waits)."""

    def pause(self, job_type: str, by: str, now: datetime) -> TypePause:
        """Pause ``job_type``: claims (every claimer, from the write's commit on) pass over its
        queued jobs. Pausing a paused type changes nothing: the first pause is returned."""
        ...

    def resume(self, job_type: str) -> bool:
        """Resume ``job_type``: its due jobs are claimable again and idle workers are woken
        as for new work; False if it was not paused."""
        ...

    def paused(self) -> list[TypePause]:
        """The paused types, by name."""


class Waits(Protocol):
    """Jobs that wait for others (:mod:`jobs_core.waits`, decision 0041): the inserts of a
    dependent job and of a batch with its callback, the release pass, the waiter's reads.
    Contract: ``jobs_contract.waits``.

    Every write that ends a job that others await (a finish, a sweep, a cancel, a release that
    cancels) records that end in the same write; :meth:`release_waiting` takes the recorded ends
    once each."""

    def insert_after(
        self, new: NewJob, depends_on: Sequence[uuid.UUID], rule: WaitRule, now: datetime
    ) -> Job | None:
        """Insert ``new`` depending on the org's jobs ``depends_on`` (their rows locked while it
        is inserted, so none ends unseen): its status is :func:`jobs_core.waits.start`'s.
        None if its dedup key is held; :class:`~jobs_core.waits.DependencyInvalid` (with
        ``missing``) if an id is not a job of ``new``'s org, and then nothing is written."""
        ...

    def insert_batch(
        self, members: Sequence[NewJob], callback: NewJob, now: datetime
    ) -> tuple[list[Job], Job]:
        """Insert the members (those whose dedup key is held are skipped, as by
        ``insert_many``) and the callback, waiting for the members inserted with rule
        ``ALL_ENDED``, in one write: both or neither. The callback's dedup key is not honoured
        (a batch's callback is always its own)."""
        ...

    def release_waiting(self, now: datetime, limit: int, release: Release) -> list[Job]:
        """Take up to ``limit`` recorded ends (oldest first, each once, skipping those another
        pass holds), apply ``release`` to each of their waiters (locked, in id order) and write
        the result; the waiters whose status changed."""
        ...

    def awaited(self, org_id: str, job_id: uuid.UUID) -> list[Awaited] | None:
        """The jobs the org's job awaits (or awaited), oldest first; None if the job is not
        the org's; an empty list for a job that awaits none."""
        ...


class Overview(Protocol):
    """An org's operations view (:mod:`jobs_core.overview`, issue 24): its jobs counted per
    type, what finished per bucket of a window, its jobs found by a part of their id, and the
    children of the jobs a page shows counted. Every read is scoped to the org. Contract:
    ``jobs_contract.overview``, ``listing``."""

    def type_counts(
        self, org_id: str, statuses: frozenset[Status] | None, type_name: str | None
    ) -> list[tuple[str, Status, int]]:
        """The org's jobs counted per type and status, only of ``statuses`` and ``type_name``
        when given (the list's filters); pairs with no job absent."""
        ...

    def series(self, org_id: str, window: Window, now: datetime) -> list[BucketFacts]:
        """Per type and bucket of ``window`` at ``now`` (:func:`jobs_core.overview.
        bucket_starts`), the org's jobs finished in it by status with the p50/p95 of their
        :func:`~jobs_core.overview.wait_s`, and the p50/p95 run time of the org's attempts
        that ended in it; only the pairs that had a finished job or an ended attempt."""
        ...

    def find_by_prefix(self, org_id: str, prefix: str, limit: int) -> list[Job]:
        """Up to ``limit`` of the org's jobs whose id's hex digits start with ``prefix``
        (:func:`jobs_core.overview.prefix_bounds`), by id."""
        ...

    def children_counts(
        self, org_id: str, parent_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, ChildCounts]:
        """For each of ``parent_ids`` that has children of the org, how many it has and how
        many of them have ended (:func:`jobs_core.listing.count_children`), in one read; a job
        with none is absent. The rows of a listed page ask it for their ids (decision 0045)."""
        ...

    def find_by_short_id(self, org_id: str, short: str, limit: int) -> list[Job]:
        """Up to ``limit`` of the org's jobs whose id's hex digits end with ``short`` (the
        panel's short id, :func:`jobs_core.overview.has_short_id`), by id."""
        ...


class JobStore(
    Enqueueing,
    Attempts,
    Recovery,
    OrgJobs,
    History,
    Overview,
    OperatorReads,
    WorkerRegistry,
    TypePauses,
    Waits,
    Protocol,
):
    """Where jobs live: one adapter plays every role, each a port of its own (decision 0031).
    Every method is atomic on its own.

    :class:`jobs_core.JobService` takes the whole store; a part that needs one role names that
    role (the worker's presence: :class:`~jobs_core.workers.WorkerRegistry`). The contract suite
    checks each role with its parts (``jobs_contract.ROLES``).
    """
