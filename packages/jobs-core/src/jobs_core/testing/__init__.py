"""A testing kit for job types (docs/testing.md): run jobs with the real runner, in the test's
own thread, on a fake clock.

:class:`JobsHarness` plays the worker: it claims a due job, gives its handler the context a
worker gives (progress and the private checkpoint saved under the attempt's lease, the throttle
on the harness's clock), runs it with :func:`jobs_core.runner.execute`, records the outcome (the
end hooks included) and hands back the job as stored. It can stop an attempt for each
:class:`~jobs_core.CancelReason` as the worker would, move time for retries, the throttle and the
sweep, and assert what was enqueued. The pytest plugin :mod:`jobs_core_pytest` offers it
as the ``jobs_harness`` fixture.

It runs over any :class:`~jobs_core.JobStore`: the in-memory one by default, or the store of a
module's own service (PostgreSQL, say) with ``JobsHarness(service=...)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from jobs_core import domain, rates
from jobs_core.clock import FakeClock
from jobs_core.context import JobContext
from jobs_core.domain import CancelReason, Job, Outcome, Requeue, Status
from jobs_core.errors import JobTimeout
from jobs_core.memory import InMemoryJobStore
from jobs_core.ports import Clock, JobFilter, JobStore
from jobs_core.registry import Registry
from jobs_core.runner import execute, failure_outcome
from jobs_core.service import JobService, SweepReport

__all__ = ["DEFAULT_ORG", "JobsHarness", "payload_matches"]

DEFAULT_ORG = "test-org"
"""The org of the jobs a harness enqueues unless told otherwise."""

_PAGE = 500


class JobsHarness:
    """A worker in the test's thread over a store, a registry and a (fake) clock.

    ``JobsHarness(registry)`` runs on a new :class:`~jobs_core.InMemoryJobStore` and a
    :class:`~jobs_core.FakeClock`; ``JobsHarness(service=module_service)`` runs on an existing
    service (its store, registry and clock). ``progress_interval_s`` is the context's throttle,
    the worker's default (1 s): on a fake clock it lets one write through per second of the
    clock, which :meth:`advance` moves.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        store: JobStore | None = None,
        clock: Clock | None = None,
        service: JobService | None = None,
        org: str = DEFAULT_ORG,
        progress_interval_s: float = 1.0,
    ) -> None:
        if service is None:
            service = JobService(
                store if store is not None else InMemoryJobStore(),
                registry if registry is not None else Registry("test"),
                clock if clock is not None else FakeClock(),
            )
        elif registry is not None or store is not None or clock is not None:
            raise ValueError("give either a service or its parts (registry, store, clock)")
        self.service = service
        self.org = org
        self.progress_interval_s = progress_interval_s
        self.last_outcome: Outcome | None = None
        """The outcome of the last attempt the harness ran."""
        self.last_recorded: Job | None = None
        """The job as that outcome left it; None when the attempt had lost its lease (the
        outcome was refused)."""
        self._orgs = {org}

    # -- what it runs on -------------------------------------------------------------------------
    @property
    def registry(self) -> Registry:
        """The job types the harness runs (register yours on it)."""
        return self.service.registry

    @property
    def store(self) -> JobStore:
        """The store the jobs live in."""
        return self.service.store

    @property
    def clock(self) -> Clock:
        """The clock of every instant the harness and the store write."""
        return self.service.clock

    def now(self) -> datetime:
        """The clock's time."""
        return self.clock.now()

    def advance(self, seconds: float) -> datetime:
        """Move the fake clock: due retries and delayed jobs, the progress throttle, the sweep's
        threshold and the end hooks' retry delay all follow it."""
        if not isinstance(self.clock, FakeClock):
            raise TypeError("advance() needs a FakeClock (this harness runs on another clock)")
        return self.clock.advance(seconds)

    # -- enqueue and run ---------------------------------------------------------------------------
    def enqueue(
        self,
        type_name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        org: str | None = None,
        **options: Any,
    ) -> Job:
        """Enqueue a job as the API would (``dedup_key``, ``run_at``, ``priority`` accepted);
        the job (the existing one when its dedup key is held)."""
        org_id = org or self.org
        self._orgs.add(org_id)
        return self.service.enqueue(org_id, type_name, payload, **options).job

    def cancel(self, job: Job) -> Job:
        """Cancel ``job`` as the API would: a queued job ends cancelled at once (its
        ``on_cancel`` runs at the next :meth:`run_end_hooks` or :meth:`drain`), a running one
        gets its cancellation requested."""
        return self.service.cancel(job.org_id, job.id)

    def claim(self, type_name: str | None = None) -> Job | None:
        """Claim the next due job (of ``type_name`` if given, else of any registered type) as a
        worker's claim would: under the types' concurrency limits, in the service's order
        (fair between orgs by default) — a job whose key or type is full is not claimed. The
        release pass runs first, as a worker's does: a job whose dependencies (or batch) have
        all ended is claimable, a waiting one is not."""
        self.release_waiting()
        types = None if type_name is None else [type_name]
        claimed = self.service.claim(1, types)
        if not claimed:
            return None
        self._orgs.add(claimed[0].org_id)
        return claimed[0]

    def context(self, job: Job, *, after_write: Callable[[], None] | None = None) -> JobContext:
        """The context a worker gives the claimed ``job``: progress and checkpoint saved under
        its lease, throttled on the harness's clock, ``ctx.enqueue`` as on a worker (children
        written with a done outcome, none after a failure; ``immediately=True`` at once);
        ``after_write`` is called after each progress write that reached the store."""
        store, clock = self.store, self.clock

        def save(document: Mapping[str, Any], checkpoint: Mapping[str, Any] | None = None) -> bool:
            saved = store.save_progress(job.ref, dict(document), clock.now(), checkpoint)
            if after_write is not None:
                after_write()
            return saved

        return JobContext(
            job,
            progress_sink=save,
            now=clock.now,
            progress_interval_s=self.progress_interval_s,
            monotonic=lambda: clock.now().timestamp(),
            checkpoint_sink=save,
            checkpoint_loader=lambda: store.checkpoint_of(job.id),
            registry=self.registry,
            enqueuer=self.service.enqueue_children,
            awaited=self.service.awaited,
        )

    def run(
        self,
        job: Job,
        ctx: JobContext | None = None,
        *,
        cancel: CancelReason | None = None,
        at_progress: int = 0,
    ) -> Job:
        """Run the claimed ``job``'s handler with the real runner and record its outcome as a
        worker does (end hooks included); the job as stored after.

        With ``cancel``, the attempt is stopped for that reason before the handler starts
        (``at_progress=0``) or right after its ``at_progress``-th progress write, as the worker
        would stop it: ``REQUESTED`` requests the cancellation in the store (the job ends
        cancelled if the handler stops); ``TIMEOUT`` fails the attempt as a timeout (re-queued if
        the type declares ``JobTimeout`` retryable); ``SHUTDOWN`` hands the job back to the queue
        with its attempt refunded; ``LEASE_LOST`` lets the sweep re-queue the job under the
        handler, whose later writes (progress, outcome) are then refused.
        """
        if ctx is not None and cancel is not None and at_progress > 0:
            raise ValueError("cancel at a progress write needs the harness's own context")
        writes = 0
        context: JobContext

        def after_write() -> None:
            nonlocal writes
            writes += 1
            if cancel is not None and writes == at_progress:
                self._stop(job, context, CancelReason(cancel))

        context = ctx if ctx is not None else self.context(job, after_write=after_write)
        if cancel is not None and at_progress <= 0:
            self._stop(job, context, CancelReason(cancel))
        job_type = self.registry.get(job.type)
        outcome = execute(job_type, context, self.clock.now)
        if cancel is CancelReason.SHUTDOWN:
            outcome = Requeue(run_at=self.now(), refund_attempt=True)
        elif cancel is CancelReason.TIMEOUT:
            error = JobTimeout(context.cancel_message or "timed out")
            outcome = failure_outcome(job_type, job, error, self.now())
        self.last_outcome = outcome
        self.last_recorded = self.service.complete(job.ref, outcome)
        stored = self.store.get(job.org_id, job.id)
        assert stored is not None, f"job {job.id} is gone"
        return stored

    def run_next(
        self,
        type_name: str | None = None,
        *,
        cancel: CancelReason | None = None,
        at_progress: int = 0,
    ) -> Job | None:
        """Claim and :meth:`run` the next due job; None when none is due."""
        job = self.claim(type_name)
        if job is None:
            return None
        return self.run(job, cancel=cancel, at_progress=at_progress)

    def drain(self, *, limit: int = 1000, follow_retries: bool = True) -> list[Job]:
        """Run due jobs until none is left, the end hooks too; the jobs as stored after each
        attempt, in order. With ``follow_retries`` (on a fake clock), time jumps to the next
        queued job of a registered type that is not due yet (a retry's backoff, a snooze, a
        delayed job) until the queue is empty."""
        ran: list[Job] = []
        while True:
            self.run_end_hooks()
            job = self.run_next()
            if job is not None:
                ran.append(job)
                if len(ran) > limit:
                    raise AssertionError(f"the queue did not drain in {limit} attempts")
                continue
            later = self._next_due() if follow_retries else None
            if later is None:
                self.run_end_hooks()
                return ran
            self.advance(max(0.0, (later - self.now()).total_seconds()))

    def sweep(self, threshold_s: float = 600.0) -> SweepReport:
        """Run the sweep once (zombies silent for more than ``threshold_s`` of the clock)."""
        return self.service.sweep(threshold_s)

    def run_end_hooks(self) -> int:
        """Run the due ``on_fail`` / ``on_cancel`` hooks (a worker's hook pass); how many."""
        self.release_waiting()  # a waiter it cancels has a hook of its own
        total = 0
        while (count := self.service.run_end_hooks()) > 0:
            total += count
        return total

    def release_waiting(self) -> list[Job]:
        """Run the release pass until it changes nothing (a worker's, decision 0041): the jobs
        waiting for others whose status changed (queued, or cancelled by a failed dependency)."""
        changed: list[Job] = []
        while released := self.service.release_waiting():
            changed.extend(released)
        return changed

    # -- what is there -------------------------------------------------------------------------
    def jobs(
        self, type_name: str | None = None, *, status: Status | None = None, org: str | None = None
    ) -> list[Job]:
        """The jobs in the store, oldest first (of the harness's orgs unless ``org``; every job
        on the in-memory store)."""
        if org is None and isinstance(self.store, InMemoryJobStore):
            found = self.store.jobs
        else:
            found = sorted(
                (
                    job
                    for org_id in ([org] if org else sorted(self._orgs))
                    for job in self._all(org_id)
                ),
                key=lambda job: (job.created_at, job.id),
            )
        return [
            job
            for job in found
            if (type_name is None or job.type == type_name)
            and (status is None or job.status is status)
        ]

    def enqueued(
        self, type_name: str, payload: Mapping[str, Any] | None = None, *, org: str | None = None
    ) -> list[Job]:
        """The jobs of ``type_name`` whose payload contains ``payload`` (every key given, equal
        values), oldest first."""
        return [
            job
            for job in self.jobs(type_name, org=org)
            if payload is None or payload_matches(job.payload, payload)
        ]

    def assert_enqueued(
        self,
        type_name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        org: str | None = None,
        count: int | None = None,
        status: Status | None = None,
    ) -> Job:
        """Assert that a job of ``type_name`` whose payload contains ``payload`` was enqueued
        (exactly ``count`` of them, if given; in ``status``, if given); the newest match."""
        matches = [
            job
            for job in self.enqueued(type_name, payload, org=org)
            if status is None or job.status is status
        ]
        wanted = "a job" if count is None else f"{count} job(s)"
        if not matches or (count is not None and len(matches) != count):
            seen = "\n".join(_shown(job) for job in self.jobs(org=org))
            raise AssertionError(
                f"expected {wanted} of type {type_name!r}"
                + (f" with payload containing {dict(payload)!r}" if payload else "")
                + (f" in status {status.value}" if status else "")
                + f", found {len(matches)}; the jobs are:\n{seen or '  (none)'}"
            )
        return matches[-1]

    def assert_not_enqueued(
        self, type_name: str, payload: Mapping[str, Any] | None = None, *, org: str | None = None
    ) -> None:
        """Assert that no job of ``type_name`` (with a payload containing ``payload``) exists."""
        matches = self.enqueued(type_name, payload, org=org)
        if matches:
            raise AssertionError(
                f"expected no job of type {type_name!r}, found {len(matches)}:"
                f" {[dict(job.payload) for job in matches]!r}"
            )

    def checkpoint_of(self, job: Job) -> Mapping[str, Any] | None:
        """The private checkpoint the job's handler saved last (None if none)."""
        return self.store.checkpoint_of(job.id)

    # -- internals -------------------------------------------------------------------------------
    def _all(self, org_id: str) -> Iterator[Job]:
        before: tuple[datetime, uuid.UUID] | None = None
        while True:
            page = self.store.list_jobs(org_id, JobFilter(limit=_PAGE, before=before))
            yield from page
            if len(page) < _PAGE:
                return
            before = (page[-1].created_at, page[-1].id)

    def _next_due(self) -> datetime | None:
        if not isinstance(self.clock, FakeClock):
            return None
        names = set(self.registry.names())
        now = self.now()
        queued = [job for job in self.jobs(status=Status.QUEUED) if job.type in names]
        waiting = [job.run_at for job in queued if job.run_at > now]
        return min([*waiting, *self._next_rate_starts(queued, now)], default=None)

    def _next_rate_starts(self, queued: list[Job], now: datetime) -> Iterator[datetime]:
        """When the due jobs held by their rate limit may start (their key's next start, as
        the store's recorded starts say: jobs_core.rates), so :meth:`drain` moves the clock
        there as a worker's claims would wait for it."""
        seen: set[tuple[str, str]] = set()
        for job in queued:
            rate = self.registry.get(job.type).rate
            key = job.concurrency_key
            if rate is None or key is None or job.run_at > now or (job.type, key) in seen:
                continue
            seen.add((job.type, key))
            starts = self.store.waiting_facts(job, now).rate_starts
            at = rates.next_start(starts, rate, now)
            if at is not None:
                yield at

    def _stop(self, job: Job, ctx: JobContext, reason: CancelReason) -> None:
        """Stop the attempt of ``job`` for ``reason`` as the worker would."""
        if reason is CancelReason.REQUESTED:
            self.service.cancel(job.org_id, job.id)
            ctx.cancel(CancelReason.REQUESTED)
        elif reason is CancelReason.LEASE_LOST:
            current = self.store.get(job.org_id, job.id)
            assert current is not None
            # the sweep re-queues it (or fails it, at max attempts) under the handler
            self.store.complete([domain.sweep_patch(current, self.now())])
            ctx.cancel(CancelReason.LEASE_LOST)
        elif reason is CancelReason.TIMEOUT:
            ctx.cancel(CancelReason.TIMEOUT, "timed out (simulated by the test)")
        else:
            ctx.cancel(CancelReason.SHUTDOWN)


def _shown(job: Job) -> str:
    """A job in an assertion's list of what there is: with its error, when it has one (a
    failed job says why)."""
    line = f"  {job.type} {job.status.value} payload={dict(job.payload)!r}"
    if job.parent_id is not None:
        line += f" parent={job.parent_id}"
    return line + (f" error={job.error!r}" if job.error else "")


def payload_matches(payload: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """True when every key of ``expected`` is in ``payload`` with an equal value."""
    return all(key in payload and payload[key] == value for key, value in expected.items())
