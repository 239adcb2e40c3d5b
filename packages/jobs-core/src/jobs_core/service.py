"""The use cases of jobs: enqueue, read, cancel, retry, delete, sweep, complete an attempt.

Entry points (the API, the CLI, the worker) call these and nothing else; every rule that is not a
pure transition of :mod:`jobs_core.domain` lives here.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobs_core import domain, flow, history
from jobs_core.claims import FAIR_CLAIM_DEFAULT
from jobs_core.clock import SystemClock
from jobs_core.domain import AttemptRef, Job, NewJob, Outcome, Status
from jobs_core.errors import DedupConflict, InvalidTransition, JobNotFound
from jobs_core.history import AttemptRecord
from jobs_core.hooks import call_end_hook
from jobs_core.listing import ChildCounts
from jobs_core.observe import NoObserver, Observer
from jobs_core.pauses import TypePause
from jobs_core.ports import ClaimNext, Clock, JobFilter, JobStore
from jobs_core.registry import Registry
from jobs_core.tracing import Tracer, process_tracer
from jobs_core.wait_service import WaitUseCases
from jobs_core.waiting import WaitReason, why_waiting

log = logging.getLogger("jobs.service")

ENQUEUE_TRIES = 3
"""Spec 000 §1: the winner of a dedup conflict may finish (and release its key) between the
conflict and the re-read; the enqueue then inserts again, at most this many times."""


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The job an enqueue returns; ``created`` is False when an existing job was deduplicated."""

    job: Job
    created: bool


@dataclass(slots=True)
class SweepReport:
    """What one sweep did."""

    requeued: list[Job] = field(default_factory=list)
    failed: list[Job] = field(default_factory=list)
    cancelled: list[Job] = field(default_factory=list)


class JobService(WaitUseCases):
    """The use cases over one store, one registry and one clock."""

    def __init__(
        self,
        store: JobStore,
        registry: Registry,
        clock: Clock | None = None,
        *,
        fair_claim: bool = FAIR_CLAIM_DEFAULT,
        worker: str | None = None,
        observer: Observer | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.store = store
        # Spans of enqueues (decision 0039; None: the process's, off unless the deployable
        # turned it on); the worker makes the spans of attempts.
        self.tracer: Tracer = tracer if tracer is not None else process_tracer()
        # Told of enqueues, claims and ends of attempts, after each store call (the metrics).
        self.observer: Observer = observer or NoObserver()
        # Who runs the attempts this service ends (``host:pid``), for their records.
        self.worker = worker
        self.registry = registry
        self.clock: Clock = clock or SystemClock()
        # Fairness between orgs (on by default, docs/flow-control.md): this claimer's turn.
        self.fair_claim = fair_claim
        self._turn = flow.FairTurn()

    def using(self, store: JobStore) -> JobService:
        """The same use cases over another store (e.g. one bound to a caller's transaction)."""
        return JobService(
            store,
            self.registry,
            self.clock,
            fair_claim=self.fair_claim,
            worker=self.worker,
            observer=self.observer,
            tracer=self.tracer,
        )

    # -- enqueue ------------------------------------------------------------------------------
    def enqueue(
        self,
        org_id: str,
        type_name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        dedup_key: str | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> Enqueued:
        """Enqueue a job, or return the org's job that holds ``dedup_key``.

        Raises :class:`~jobs_core.errors.UnknownJobType` or ``PayloadInvalid`` for a bad request
        (``DedupKeyOwned`` when the type derives its key and ``dedup_key`` differs), ValueError
        for a ``priority`` out of range.
        """
        new = self.registry.new_job(
            org_id, type_name, payload, dedup_key=dedup_key, run_at=run_at, priority=priority
        )
        return self.enqueue_new(new)

    def enqueue_new(self, new: NewJob) -> Enqueued:
        """Enqueue an already resolved :class:`NewJob` (the dedup loop of docs/contract.md §3)."""
        if not self.tracer.enabled:
            return self._enqueue_new(new)
        with self.tracer.producing([new]) as span:
            enqueued = self._enqueue_new(span.specs[0])
            span.created([enqueued.job if enqueued.created else None])
            return enqueued

    def _enqueue_new(self, new: NewJob) -> Enqueued:
        for _ in range(ENQUEUE_TRIES):
            job = self.store.insert(new, self.clock.now())
            if job is not None:
                self.observer.enqueued([job])
                return Enqueued(job, created=True)
            if new.dedup_key is None:  # pragma: no cover - a store that conflicts without a key
                raise DedupConflict("the store refused a job that has no dedup key")
            holder = self.store.find_by_dedup_key(new.org_id, new.dedup_key)
            if holder is not None:
                return Enqueued(holder, created=False)
        raise DedupConflict(
            f"dedup key {new.dedup_key!r} kept changing hands; gave up after {ENQUEUE_TRIES} tries"
        )

    def enqueue_many(
        self,
        org_id: str,
        type_name: str,
        payloads: Iterable[Mapping[str, Any]],
        *,
        dedup_keys: Sequence[str | None] | None = None,
        priority: int = 0,
    ) -> list[Job]:
        """Enqueue many jobs of one type in one round trip; jobs whose key is held are skipped."""
        specs = self.registry.new_jobs(
            org_id, type_name, payloads, dedup_keys=dedup_keys, priority=priority
        )
        if dedup_keys is not None and len(dedup_keys) != len(specs):
            raise ValueError("dedup_keys must have one entry per payload")
        return self._insert_many(specs)

    def _insert_many(self, specs: Sequence[NewJob]) -> list[Job]:
        """One bulk insert of ``specs``, the jobs created told to the observer (and, tracing,
        made in one producer span)."""
        if not self.tracer.enabled:
            jobs = self.store.insert_many(specs, self.clock.now())
        else:
            with self.tracer.producing(specs) as span:
                jobs = self.store.insert_many(span.specs, self.clock.now())
                span.created(jobs)
        self.observer.enqueued(jobs)
        return jobs

    def enqueue_children(self, specs: Sequence[NewJob]) -> list[Job]:
        """Enqueue resolved children at once (``ctx.enqueue(..., immediately=True)``): one
        spec as :meth:`enqueue_new` (the holder of its dedup key comes back), several in one
        bulk insert (those whose key is held are skipped)."""
        if len(specs) == 1:
            return [self.enqueue_new(specs[0]).job]
        return self._insert_many(specs)

    # -- org-scoped reads and actions ---------------------------------------------------------
    def get(self, org_id: str, job_id: uuid.UUID) -> Job:
        """The org's job; :class:`JobNotFound` if absent or another org's."""
        job = self.store.get(org_id, job_id)
        if job is None:
            raise JobNotFound()
        return job

    def list_jobs(self, org_id: str, query: JobFilter) -> list[Job]:
        """The org's jobs, newest first."""
        return self.store.list_jobs(org_id, query)

    def children_counts(
        self, org_id: str, parent_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, ChildCounts]:
        """How many children each of the org's ``parent_ids`` has and how many ended, in one
        read (a job with none is absent; decision 0045)."""
        return self.store.children_counts(org_id, parent_ids)

    def get_any_org(self, job_id: uuid.UUID) -> Job:
        """The job with this id, whichever org owns it (an operator's read: the CLI);
        :class:`JobNotFound` if there is none."""
        job = self.store.get_any_org(job_id)
        if job is None:
            raise JobNotFound()
        return job

    def list_all_orgs(self, query: JobFilter) -> list[Job]:
        """The jobs of every org, newest first (an operator's read: the CLI)."""
        return self.store.list_all_orgs(query)

    def attempts(self, org_id: str, job_id: uuid.UUID) -> list[AttemptRecord]:
        """The records of the org's job's attempts, oldest first (:mod:`jobs_core.history`)."""
        return self.store.attempts(org_id, job_id)

    def stats(self, org_id: str) -> dict[Status, int]:
        """Count per status for the org."""
        return self.store.stats(org_id)

    def cancel(self, org_id: str, job_id: uuid.UUID) -> Job:
        """Cancel a queued job now; ask a running one to stop. ``InvalidTransition`` if finished."""
        job = self.store.cancel(org_id, job_id, self.clock.now())
        if job is None:
            raise JobNotFound()
        return job

    def retry(self, org_id: str, job_id: uuid.UUID) -> Job:
        """Queue a failed or cancelled job again (``DedupConflict`` if its key is held now)."""
        job = self.store.retry(org_id, job_id, self.clock.now())
        if job is None:
            raise JobNotFound()
        return job

    def delete(self, org_id: str, job_id: uuid.UUID) -> None:
        """Delete a finished job; never one of a protected type (its rows are domain history)."""
        job = self.get(org_id, job_id)
        self.check_deletable(job)
        if not self.store.delete(org_id, job_id):
            raise JobNotFound()

    def is_protected(self, job: Job) -> bool:
        """Whether ``job`` is of a protected type: domain history, never deleted."""
        return job.type in self.registry and self.registry.get(job.type).protected

    def check_deletable(self, job: Job) -> None:
        """:class:`InvalidTransition` unless :meth:`delete` may delete ``job`` as it is: not
        of a protected type, and finished (the store checks the latter again under its lock)."""
        if self.is_protected(job):
            raise InvalidTransition(
                job.status,
                "delete",
                f"jobs of type {job.type!r} are domain history and are never deleted",
            )
        domain.check_deletable(job)

    # -- paused types (operators) -------------------------------------------------------------
    def pause_type(self, type_name: str, by: str) -> TypePause:
        """Pause a registered type for every org (:mod:`jobs_core.pauses`): its queued jobs
        stay queued and no claim takes them until :meth:`resume_type`. Raises
        :class:`~jobs_core.errors.UnknownJobType` for a type this registry does not know."""
        self.registry.get(type_name)
        return self.store.pause(type_name, by, self.clock.now())

    def resume_type(self, type_name: str) -> bool:
        """Resume a paused type (any name: a type no longer registered can still be resumed);
        False if it was not paused."""
        return self.store.resume(type_name)

    def paused_types(self) -> dict[str, TypePause]:
        """The paused types by name."""
        return {pause.type: pause for pause in self.store.paused()}

    # -- worker side --------------------------------------------------------------------------
    def claim(self, limit: int, types: Sequence[str] | None = None) -> list[Job]:
        """Claim up to ``limit`` jobs of the registered types, or of those of ``types`` (under
        their limits; in fair order between orgs with ``fair_claim``: every selection composes,
        decision 0027)."""
        started = time.perf_counter()
        claimed = self._claim(limit, types)
        self.observer.claimed(claimed, time.perf_counter() - started)
        return claimed

    def _claim(self, limit: int, types: Sequence[str] | None) -> list[Job]:
        turn = self._turn if self.fair_claim else None
        limits = self._limits()
        now = self.clock.now()
        names = self.registry.names() if types is None else list(types)
        if turn is None and limits is None:  # the plain claim (a store written before limits)
            return self.store.claim(limit, now, names)
        if turn is None:
            return self.store.claim(limit, now, names, limits=limits)
        claimed = self.store.claim(limit, now, names, limits=limits, turn=turn)
        self._turn = flow.next_turn(turn, claimed)
        return claimed

    def _limits(self) -> flow.ClaimLimits | None:
        """The concurrency limits of the registered types (None when no type declares any, so
        the store runs its plain claim)."""
        return self.registry.flow_limits() or None

    def heartbeat(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        """Show that the attempts ``refs`` are alive (docs/contract.md §5); the ids still held."""
        return self.store.heartbeat(refs, self.clock.now())

    def save_progress(
        self,
        ref: AttemptRef,
        progress: dict[str, Any],
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write a running attempt's progress document (and its private checkpoint, if given,
        in the same write); False if its lease is gone."""
        return self.store.save_progress(ref, progress, self.clock.now(), checkpoint)

    def checkpoint_of(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The private checkpoint last saved for the job (decision 0025), or None: what a
        worker gives its handler as ``ctx.resume``."""
        return self.store.checkpoint_of(job_id)

    def cancel_requested(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        """The ids of the attempts ``refs`` whose cancellation was requested."""
        return self.store.cancel_requested(refs)

    def why_waiting(self, job: Job) -> list[WaitReason]:
        """Why the queued (or waiting) ``job`` has not started yet (:mod:`jobs_core.waiting`);
        empty for any other."""
        if job.status is Status.WAITING:
            return why_waiting(job, None, None, self.clock.now())
        if job.status is not Status.QUEUED:
            return []
        now = self.clock.now()
        job_type = self.registry.get(job.type) if job.type in self.registry else None
        facts = self.store.waiting_facts(job, now) if job_type is not None else None
        return why_waiting(job, job_type, facts, now)

    def complete(self, ref: AttemptRef, outcome: Outcome) -> Job | None:
        """Record the outcome of an attempt; run its end hook (``on_fail``, ``on_cancel``) if it
        failed or was cancelled. None if stale."""
        return self.complete_many([(ref, outcome)])[0]

    def complete_many(self, outcomes: Sequence[tuple[AttemptRef, Outcome]]) -> list[Job | None]:
        """:meth:`complete` for many attempts in one round trip."""
        finished, _ = self._complete(outcomes, 0)
        return finished

    def _cancel_requeued(self, job: Job | None) -> Job | None:
        """``job`` as the write left it, or cancelled now if :func:`domain.cancel_now` says so
        (a request made during its attempt; a crash in between leaves the request on the queued
        job, and the next attempt is stopped by it as any running job is)."""
        if not domain.cancel_now(job):
            return job
        assert job is not None
        return self.store.cancel(job.org_id, job.id, self.clock.now()) or job

    def _ended(self, jobs: Iterable[Job | None]) -> None:
        """Run the end hooks of the jobs that just ended failed or cancelled, then clear their
        durable markers (one round trip for the batch); a hook that could not run stays due
        and any worker's :meth:`run_end_hooks` runs it later."""
        settled = [
            job
            for job in jobs
            if job is not None
            and job.status in domain.ENDED_WITH_HOOK
            and call_end_hook(self.registry, job)
        ]
        if settled:
            self.store.end_hooks_done(settled)

    def run_end_hooks(self, limit: int = 100) -> int:
        """Run the due end hooks of the registered types once (the hooks of jobs ended without
        a worker, e.g. cancelled while queued, or whose worker died before running them); how
        many hooks were taken. At least once: see :mod:`jobs_core.hooks`."""
        names = self.registry.names()
        if not names:
            return 0
        now = self.clock.now()
        taken = self.store.take_end_hooks(
            names, limit, now, now + timedelta(seconds=domain.HOOK_RETRY_S)
        )
        self._ended(taken)
        return len(taken)

    def complete_and_claim(
        self, outcomes: Sequence[tuple[AttemptRef, Outcome]], limit: int
    ) -> tuple[list[Job | None], list[Job]]:
        """:meth:`complete_many` and :meth:`claim` in one round trip (the worker's completer:
        the outcomes of its slots and the jobs for the slots they freed); the finished jobs
        (None if stale) and the claimed ones. Without outcomes, :meth:`claim`."""
        return self._complete(outcomes, limit)

    def _complete(
        self, outcomes: Sequence[tuple[AttemptRef, Outcome]], limit: int
    ) -> tuple[list[Job | None], list[Job]]:
        """The outcomes as the domain's patches, written in one call of
        :meth:`JobStore.complete`, with a claim of up to ``limit`` jobs (none for 0); the end
        hooks of the jobs they ended failed or cancelled run after (their markers are in the
        patches)."""
        if not outcomes:
            return [], self.claim(limit) if limit > 0 else []
        now = self.clock.now()
        patches = [domain.patch(ref, outcome, now, worker=self.worker) for ref, outcome in outcomes]
        claim_next = None
        if limit > 0:
            limits = self._limits()
            turn = self._turn if self.fair_claim else None
            claim_next = ClaimNext(limit, now, self.registry.names(), limits, turn)
        started = time.perf_counter()
        finished, claimed = self.store.complete(patches, claim_next=claim_next)
        self._observe_finished(patches, finished, time.perf_counter() - started)
        if claim_next is not None:
            self.observer.claimed(claimed, None)
        if claim_next is not None and claim_next.turn is not None:
            self._turn = flow.next_turn(claim_next.turn, claimed)
        finished = [self._cancel_requeued(job) for job in finished]
        self._ended(finished)
        return finished, claimed

    def _observe_finished(
        self, patches: Sequence[domain.Patch], written: Sequence[Job | None], seconds: float | None
    ) -> None:
        """Tell the observer of the attempts whose patch applied (type, outcome, duration);
        with no observer, build nothing."""
        if isinstance(self.observer, NoObserver):
            return
        ended = []
        for change, job in zip(patches, written, strict=True):
            if job is not None and (counted := history.ended_of(change, job.type)) is not None:
                ended.append(counted)
        self.observer.finished(ended, seconds)

    def sweep(self, threshold_s: float, batch: int = 500) -> SweepReport:
        """Re-queue or fail the zombies: running jobs silent for more than ``threshold_s``.

        Safe with several sweepers at once: each write (:func:`jobs_core.domain.sweep_patch`) is
        conditional on the attempt's lease and on the heartbeat the sweep read, so one sweeper
        wins and only it runs the end hook; a job that showed life in between is left alone.
        """
        report = SweepReport()
        now = self.clock.now()
        stale_before = now - timedelta(seconds=threshold_s)
        while True:
            stale = self.store.find_stale(stale_before, batch)
            for job in stale:
                change = domain.sweep_patch(job, now)
                [updated] = self.store.complete([change]).finished
                if updated is None:
                    continue
                self._observe_finished([change], [updated], None)
                if updated.status is Status.FAILED:
                    report.failed.append(updated)
                    self._ended([updated])
                elif updated.status is Status.CANCELLED:
                    report.cancelled.append(updated)
                    self._ended([updated])
                else:
                    report.requeued.append(updated)
                log.warning(
                    "swept zombie job %s (%s, attempt %d/%d) -> %s",
                    job.id,
                    job.type,
                    job.attempts,
                    job.max_attempts,
                    updated.status,
                )
            if len(stale) < batch:
                return report
