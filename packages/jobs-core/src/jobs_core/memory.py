"""The in-memory adapter: a first-class :class:`~jobs_core.ports.JobStore`, not a mock.

It applies the pure transitions of :mod:`jobs_core.domain` under one lock, so it has the same
semantics as the PostgreSQL store (the contract suite runs against both). Module authors use it
in their own tests; it is inspectable (``jobs``).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence, Set
from datetime import datetime
from typing import Any

from jobs_core import codec, domain, flow, history, parents
from jobs_core.children import children_due
from jobs_core.claims import ClaimPlan, choose
from jobs_core.clock import ascending_uuid7s, uuid7
from jobs_core.domain import AttemptRef, Job, NewJob, Patch, Status
from jobs_core.errors import DedupConflict
from jobs_core.events import InMemoryEventLog
from jobs_core.history import AttemptRecord
from jobs_core.memory_listing import MemoryListing, queue_order
from jobs_core.memory_overview import MemoryOverview
from jobs_core.memory_waits import MemoryWaits
from jobs_core.observe import active_state
from jobs_core.pauses import TypePause
from jobs_core.ports import AHEAD_CAP, ClaimNext, Completed, WaitingFacts
from jobs_core.workers import WorkerInfo, live_after


class InMemoryJobStore(MemoryListing, MemoryOverview, MemoryWaits):
    """A thread-safe job store held in a dict (its listed reads: :mod:`jobs_core.
    memory_listing`; its Overview role: :mod:`jobs_core.memory_overview`; its Waits role:
    :mod:`jobs_core.memory_waits`)."""

    def __init__(self, id_factory: Callable[[], uuid.UUID] = uuid7) -> None:
        self.events = InMemoryEventLog()
        """The feed of every visible change of a job (``jobs_core.events``)."""
        self._jobs = self._init_waits(self.events)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        self._new_id = id_factory
        self._workers: dict[uuid.UUID, WorkerInfo] = {}
        self._hook_due: dict[uuid.UUID, datetime] = {}
        """When the end hook of a failed or cancelled job is due (jobs_core.hooks): the private
        ``hook_due_at`` column, never part of a Job (decision 0025)."""
        self._checkpoints: dict[uuid.UUID, dict[str, Any]] = {}
        """Private checkpoints, never part of a Job (decision 0025)."""
        self._attempts: dict[uuid.UUID, list[AttemptRecord]] = {}
        """Each job's attempt records, oldest first (jobs_core.history)."""
        self._paused: dict[str, TypePause] = {}
        """The paused types (jobs_core.pauses), by name."""
        self._starts: dict[tuple[str, str], tuple[datetime, ...]] = {}  # jobs_core.rates

    # -- inspection ---------------------------------------------------------------------------
    @property
    def jobs(self) -> list[Job]:
        """Every job, oldest first."""
        with self._lock:
            return sorted(self._jobs.values(), key=queue_order)

    def wait_for_change(self, generation: int, timeout: float) -> int:
        """Block until a job is enqueued or re-queued after ``generation``; the new generation."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != generation, timeout)
            return self._generation

    @property
    def generation(self) -> int:
        """A counter bumped each time work becomes available."""
        with self._lock:
            return self._generation

    def _work_available(self) -> None:
        self._generation += 1
        self._changed.notify_all()

    # -- enqueue ------------------------------------------------------------------------------
    def _key_holder(self, org_id: str, key: str) -> Job | None:
        for job in self._jobs.values():
            if job.dedup_key == key and job.org_id == org_id:
                return job
        return None

    def insert(self, new: NewJob, now: datetime) -> Job | None:
        """Insert a queued job; None if its dedup key is held."""
        return self._insert(new, now, None)

    def _insert(self, new: NewJob, now: datetime, job_id: uuid.UUID | None) -> Job | None:
        with self._lock:
            if new.dedup_key is not None and self._key_holder(new.org_id, new.dedup_key):
                return None
            job = domain.new_job(_copied(new), job_id or self._new_id(), now)
            self._jobs[job.id] = job
            self._work_available()
            return job

    def insert_many(self, new: Sequence[NewJob], now: datetime) -> list[Job]:
        """Insert many jobs; those whose key is held are skipped."""
        checked = [_copied(spec) for spec in new]  # one refused payload refuses the batch
        # Ascending ids, as on PostgreSQL: the batch runs in input order (docs/contract.md §3).
        if self._new_id is uuid7:
            ids = ascending_uuid7s(len(checked))
        else:
            ids = [self._new_id() for _ in checked]
        with self._lock:
            return [
                job
                for spec, job_id in zip(checked, ids, strict=True)
                if (job := self._insert(spec, now, job_id)) is not None
            ]

    def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
        """The org's job holding ``dedup_key``."""
        with self._lock:
            return self._key_holder(org_id, dedup_key)

    # -- worker -------------------------------------------------------------------------------
    def claim(
        self,
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: flow.ClaimLimits | None = None,
        turn: flow.FairTurn | None = None,
    ) -> list[Job]:
        """Take up to ``limit`` due queued jobs (of ``types``, if given) that fit ``limits``,
        highest priority then oldest first (in fair order under ``turn``): the jobs
        :func:`jobs_core.claims.choose` picks for this plan."""
        return self._claim(ClaimPlan.of(limit, now, types, limits=limits, turn=turn), frozenset())

    def _claim(self, plan: ClaimPlan, skipped: Set[uuid.UUID]) -> list[Job]:
        if plan.empty:
            return []
        with self._lock:
            jobs = self._jobs.values()
            queued = (j for j in jobs if j.status is Status.QUEUED and j.id not in skipped)
            running = (j for j in jobs if j.status is Status.RUNNING) if plan.limited else ()
            claimed = []
            for job in choose(plan, queued, running, self._paused, self._starts):
                held = domain.claim(job, uuid.uuid4(), plan.now)
                self._jobs[job.id] = held
                claimed.append(held)
            if plan.rated and plan.limits:
                self._starts.update(flow.record(self._starts, claimed, plan.limits, plan.now))
            return claimed

    def _held(self, ref: AttemptRef) -> Job | None:
        job = self._jobs.get(ref.job_id)
        if job is None or job.status is not Status.RUNNING or job.lease != ref.lease:
            return None
        return job

    def heartbeat(self, refs: Sequence[AttemptRef], now: datetime) -> set[uuid.UUID]:
        """Refresh ``progress.updated_at`` of held jobs."""
        alive = set()
        with self._lock:
            for ref in refs:
                job = self._held(ref)
                if job is not None:
                    self._jobs[job.id] = domain.heartbeat(job, now)
                    alive.add(job.id)
        return alive

    def save_progress(
        self,
        ref: AttemptRef,
        progress: dict[str, Any],
        now: datetime,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool:
        """Replace the progress of a held job (and its private checkpoint, if given)."""
        state = None if checkpoint is None else codec.normalise_document(dict(checkpoint))
        with self._lock:
            job = self._held(ref)
            if job is None:
                return False
            document = codec.normalise_document(progress)
            self._jobs[job.id] = domain.save_progress(job, document, now)
            if state is not None:
                self._checkpoints[job.id] = state
            return True

    def checkpoint_of(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The job's private checkpoint (a copy), or None."""
        with self._lock:
            state = self._checkpoints.get(job_id)
            return None if state is None else codec.normalise_document(state)

    def cancel_requested(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        """Held jobs whose cancellation was requested."""
        with self._lock:
            return {
                job.id
                for ref in refs
                if (job := self._held(ref)) is not None and job.cancel_requested_at is not None
            }

    def complete(
        self, patches: Sequence[Patch], *, claim_next: ClaimNext | None = None
    ) -> Completed:
        """Apply each patch to the job its attempt holds (:func:`jobs_core.domain.apply`), then
        :meth:`claim` with ``claim_next`` (of jobs that were queued before the call)."""
        with self._lock:
            finished = [self._apply(change) for change in patches]
            for i, (change, written) in enumerate(zip(patches, finished, strict=True)):
                # The children of an attempt ended done or waiting for them, in the same write
                # (decisions 0038, 0043); a parent waiting for them gets their edges there too.
                children = children_due(change, written)
                at = change.ended_at
                inserted = self.insert_many(children, at) if children and at is not None else []
                if written is not None and parents.waits_for_children(change, written):
                    finished[i] = self._wait_for_children(written, change, inserted)
            if claim_next is None:
                return Completed(finished, [])
            # PostgreSQL's statement sees one snapshot: a job it re-queues is not due for its
            # own claim.
            requeued = {j.id for j in finished if j is not None and j.status is Status.QUEUED}
            claimed = self._claim(
                ClaimPlan.of(
                    claim_next.limit,
                    claim_next.now,
                    claim_next.types,
                    limits=claim_next.limits,
                    turn=claim_next.turn,
                ),
                requeued,
            )
            return Completed(finished, claimed)

    def _apply(self, change: Patch) -> Job | None:
        job = self._jobs.get(change.ref.job_id)
        if job is None or not domain.applies(job, change):
            return None
        if change.report is not None:  # as the PostgreSQL store reads it back (a copy)
            change = dataclasses.replace(change, report=codec.normalise_document(change.report))
        written = domain.apply(job, change)
        self._jobs[job.id] = written
        self._mark_hook(job.id, change.hook_due_at)
        records = self._attempts.setdefault(job.id, [])
        record = history.record_of(change, len(records) + 1)
        if record is not None:
            records.append(record)
        if written.status is Status.QUEUED:
            self._work_available()
        return written

    def _mark_hook(self, job_id: uuid.UUID, due_at: datetime | None) -> None:
        """Assign the job's private ``hook_due_at`` as the core gave it (None: no hook due)."""
        if due_at is None:
            self._hook_due.pop(job_id, None)
        else:
            self._hook_due[job_id] = due_at

    def find_stale(self, stale_before: datetime, limit: int) -> list[Job]:
        """Running jobs not seen since ``stale_before``."""
        with self._lock:
            stale = [j for j in self._jobs.values() if domain.is_stale(j, stale_before)]
            return sorted(stale, key=queue_order)[:limit]

    def take_end_hooks(
        self, types: Sequence[str], limit: int, now: datetime, retry_at: datetime
    ) -> list[Job]:
        """Jobs of ``types`` whose end hook is due, each due again at ``retry_at``."""
        wanted = frozenset(types)
        with self._lock:
            due = sorted(
                (at, job_id)
                for job_id, at in self._hook_due.items()
                if at <= now and self._jobs[job_id].type in wanted
            )[: max(0, limit)]
            for _, job_id in due:
                self._hook_due[job_id] = retry_at
            return [self._jobs[job_id] for _, job_id in due]

    def end_hooks_done(self, jobs: Sequence[Job]) -> None:
        """Clear the due hooks of ``jobs`` that still have the same ending."""
        with self._lock:
            for job in jobs:
                current = self._jobs.get(job.id)
                if current is not None and current.finished_at == job.finished_at:
                    self._hook_due.pop(job.id, None)

    def waiting_facts(self, job: Job, now: datetime) -> WaitingFacts:
        """The counts behind "why is this job waiting?"."""
        with self._lock:
            running_key = running_type = ahead = 0
            mine = domain.claim_order(job)
            for other in self._jobs.values():
                if other.type != job.type:
                    continue
                if other.status is Status.RUNNING:
                    running_type += 1
                    if job.concurrency_key is not None and (
                        other.concurrency_key == job.concurrency_key
                    ):
                        running_key += 1
                elif (
                    other.status is Status.QUEUED
                    and other.run_at <= now
                    and domain.claim_order(other) < mine
                ):
                    ahead += 1
            serving = sum(job.type in w.types for w in self._live(now))
            starts = self._starts.get((job.type, job.concurrency_key or ""), ())
            counts = (running_key, running_type, min(ahead, AHEAD_CAP), serving)
            return WaitingFacts(*counts, job.type in self._paused, starts)

    # -- paused types -------------------------------------------------------------------------
    def pause(self, job_type: str, by: str, now: datetime) -> TypePause:
        """Pause ``job_type`` (the first pause stays)."""
        with self._lock:
            return self._paused.setdefault(job_type, TypePause(job_type, now, by))

    def resume(self, job_type: str) -> bool:
        """Resume ``job_type``; its jobs wake the workers as new work does."""
        with self._lock:
            if self._paused.pop(job_type, None) is None:
                return False
            self._work_available()
            return True

    def paused(self) -> list[TypePause]:
        """The paused types, by name."""
        with self._lock:
            return sorted(self._paused.values(), key=lambda p: p.type)

    # -- workers ------------------------------------------------------------------------------
    def _live(self, now: datetime) -> list[WorkerInfo]:
        after = live_after(now)
        for worker_id in [w.id for w in self._workers.values() if w.last_seen_at < after]:
            del self._workers[worker_id]
        return sorted(self._workers.values(), key=lambda w: (w.started_at, w.id))

    def register_worker(self, worker: WorkerInfo) -> None:
        """Record a worker."""
        with self._lock:
            self._live(worker.last_seen_at)
            self._workers[worker.id] = worker

    def worker_seen(self, worker_id: uuid.UUID, now: datetime) -> bool:
        """Refresh a worker's last sign of life."""
        with self._lock:
            worker = self._workers.get(worker_id)
            if worker is None:
                return False
            self._workers[worker_id] = dataclasses.replace(worker, last_seen_at=now)
            return True

    def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Forget a worker."""
        with self._lock:
            self._workers.pop(worker_id, None)

    def live_workers(self, now: datetime) -> list[WorkerInfo]:
        """The live workers, oldest first."""
        with self._lock:
            return self._live(now)

    # -- org-scoped ---------------------------------------------------------------------------
    def _own(self, org_id: str, job_id: uuid.UUID) -> Job | None:
        job = self._jobs.get(job_id)
        return job if job is not None and job.org_id == org_id else None

    def get(self, org_id: str, job_id: uuid.UUID) -> Job | None:
        """The org's job."""
        with self._lock:
            return self._own(org_id, job_id)

    def stats(self, org_id: str) -> dict[Status, int]:
        """Count per status."""
        counts = dict.fromkeys(Status, 0)
        with self._lock:
            for job in self._jobs.values():
                if job.org_id == org_id:
                    counts[job.status] += 1
        return counts

    def cancel(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Cancel a queued job, or request cancellation of a running one."""
        with self._lock:
            job = self._own(org_id, job_id)
            if job is None:
                return None
            updated = domain.cancel(job, now)
            if updated is not job:
                self._jobs[job.id] = updated
                self._mark_hook(job.id, domain.end_hook_due(updated.status, now, by_worker=False))
            return updated

    def retry(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Put a failed or cancelled job back in the queue."""
        with self._lock:
            job = self._own(org_id, job_id)
            if job is None:
                return None
            retried = domain.retry(job, now)
            if retried.dedup_key is not None:
                holder = self._key_holder(org_id, retried.dedup_key)
                if holder is not None and holder.id != job.id:
                    raise DedupConflict(
                        f"dedup key {retried.dedup_key!r} is held by job {holder.id}"
                    )
            self._jobs[job.id] = retried
            self._mark_hook(job.id, domain.end_hook_due(retried.status, now, by_worker=False))
            self._work_available()
            return retried

    def delete(self, org_id: str, job_id: uuid.UUID) -> bool:
        """Delete a finished job."""
        with self._lock:
            job = self._own(org_id, job_id)
            if job is None:
                return False
            domain.check_deletable(job)
            del self._jobs[job.id]
            self._hook_due.pop(job.id, None)
            self._checkpoints.pop(job.id, None)
            self._attempts.pop(job.id, None)
            return True

    def attempts(self, org_id: str, job_id: uuid.UUID) -> list[AttemptRecord]:
        """The records of the org's job's attempts, oldest first."""
        with self._lock:
            if self._own(org_id, job_id) is None:
                return []
            return list(self._attempts.get(job_id, ()))

    # -- operator reads across orgs -----------------------------------------------------------
    def get_any_org(self, job_id: uuid.UUID) -> Job | None:
        """The job with this id, whichever org owns it."""
        with self._lock:
            return self._jobs.get(job_id)

    def active_counts(self, now: datetime) -> dict[tuple[str, str], int]:
        """The live jobs counted by type and :func:`jobs_core.observe.active_state`."""
        with self._lock:
            states = [(job.type, active_state(job, now)) for job in self._jobs.values()]
        return dict(Counter((t, s) for t, s in states if s is not None))


class InMemoryWakeup:
    """Wakes a worker when the in-memory store gets new work."""

    def __init__(self, store: InMemoryJobStore) -> None:
        self._store = store
        self._seen = store.generation
        self._closed = False

    def wait(self, timeout: float) -> bool:
        """Block until new work or ``timeout``."""
        if self._closed:
            return False
        generation = self._store.wait_for_change(self._seen, timeout)
        woken = generation != self._seen
        self._seen = generation
        return woken

    def close(self) -> None:
        """Stop waiting."""
        self._closed = True


def _copied(new: NewJob) -> NewJob:
    return dataclasses.replace(new, payload=codec.payload(new.payload))
