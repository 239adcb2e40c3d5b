"""The use cases of jobs that wait for others (:mod:`jobs_core.waits`, decision 0041): enqueue
after other jobs, enqueue a batch with its callback, the release pass, a waiter's reads.
:class:`jobs_core.JobService` has them (a base class of its own, to keep each file to one
concern)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs_core import waits
from jobs_core.domain import Job
from jobs_core.errors import DedupConflict, JobNotFound
from jobs_core.states import Status
from jobs_core.waits import Awaited, DependencyInvalid

if TYPE_CHECKING:
    from jobs_core.observe import Observer
    from jobs_core.ports import Clock, JobStore
    from jobs_core.registry import Registry
    from jobs_core.tracing import Tracer

RELEASE_BATCH = 500
"""Recorded ends a release pass takes at most."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as enqueued: its members (those a held dedup key skipped are absent) and the
    callback that runs once they have all ended."""

    members: list[Job]
    callback: Job


@dataclass(frozen=True, slots=True)
class AwaitedSummary:
    """What a waiter awaits: the jobs, and how many of them are in each status."""

    jobs: list[Awaited]

    @property
    def counts(self) -> dict[Status, int]:
        """Jobs per status (every status present, 0 for none)."""
        counts = dict.fromkeys(Status, 0)
        for job in self.jobs:
            counts[job.status] += 1
        return counts

    @property
    def ended(self) -> int:
        """How many have ended."""
        return sum(1 for job in self.jobs if job.status.is_finished)


class WaitUseCases:
    """Dependencies, batches and their release (mixed into :class:`jobs_core.JobService`)."""

    store: JobStore
    registry: Registry
    clock: Clock
    observer: Observer
    tracer: Tracer

    def enqueue_after(
        self,
        org_id: str,
        type_name: str,
        payload: Mapping[str, Any] | None,
        depends_on: Sequence[uuid.UUID],
        *,
        dedup_key: str | None = None,
        priority: int = 0,
    ) -> Job:
        """Enqueue a job that waits until the org's jobs ``depends_on`` have ended (see
        :class:`~jobs_core.waits.WaitRule`; the type's ``after_failed_dependency`` picks it).

        Raises :class:`~jobs_core.waits.DependencyInvalid` for a bad list or an id that is not
        a job of the org (nothing written), :class:`DedupConflict` when ``dedup_key`` is held
        (a dependent job is never deduplicated into another: its dependencies would differ).
        """
        ids = waits.check_dependencies(depends_on)
        new = self.registry.new_job(
            org_id, type_name, payload, dedup_key=dedup_key, priority=priority
        )
        rule = waits.rule_for(self.registry.get(type_name).after_failed_dependency)
        with self.tracer.producing([new]) as span:
            job = self.store.insert_after(span.specs[0], ids, rule, self.clock.now())
            span.created([job])
        if job is None:
            raise DedupConflict(f"dedup key {new.dedup_key!r} is held by another job of the org")
        self.observer.enqueued([job])
        return job

    def enqueue_batch(
        self,
        org_id: str,
        members: Sequence[tuple[str, Mapping[str, Any] | None]],
        callback: tuple[str, Mapping[str, Any] | None],
        *,
        priority: int = 0,
    ) -> Batch:
        """Enqueue ``members`` (``(type, payload)`` each) and a ``callback`` job that runs once
        every member has ended, whatever its end, in one write. The callback's handler reads the
        members and their ends with ``ctx.awaited()``. Every member is validated before
        anything is written."""
        waits.check_batch(len(members))
        specs = [
            self.registry.new_job(org_id, type_name, payload, priority=priority)
            for type_name, payload in members
        ]
        type_name, payload = callback
        last = self.registry.new_job(org_id, type_name, payload, priority=priority)
        with self.tracer.producing([*specs, last]) as span:
            *traced, traced_last = span.specs
            inserted, callback_job = self.store.insert_batch(traced, traced_last, self.clock.now())
            span.created([*inserted, callback_job])
        self.observer.enqueued([*inserted, callback_job])
        return Batch(inserted, callback_job)

    def release_waiting(self, limit: int = RELEASE_BATCH) -> list[Job]:
        """One release pass: the waiters of up to ``limit`` recorded ends, each released by the
        rule (:func:`jobs_core.waits.release`); those whose status changed."""
        return self.store.release_waiting(self.clock.now(), limit, waits.release)

    def awaited(self, org_id: str, job_id: uuid.UUID) -> AwaitedSummary:
        """What the org's job awaits (an empty summary for a job that awaits nothing);
        :class:`JobNotFound` if it is not the org's."""
        found = self.store.awaited(org_id, job_id)
        if found is None:
            raise JobNotFound()
        return AwaitedSummary(found)


__all__ = ["AwaitedSummary", "Batch", "DependencyInvalid", "WaitUseCases"]
