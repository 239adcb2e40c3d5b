"""The in-memory store's part for jobs that wait for others (:class:`jobs_core.ports.Waits`,
:mod:`jobs_core.waits`): the same edges, recorded ends and release pass as PostgreSQL's
``job_waits`` and ``job_wait_ends`` tables (``jobs_postgres.waits``), under the store's lock."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobs_core import domain, parents, waits
from jobs_core.domain import Job, NewJob, Patch
from jobs_core.events import EventedJobs, InMemoryEventLog
from jobs_core.states import Status
from jobs_core.waits import Awaited, DependencyInvalid, Ended, Release, WaitRule


class WaitedJobs(EventedJobs):
    """The store's table, which also records the end of every job that others await (what
    PostgreSQL's ``jobs_record_wait_end`` trigger does): each write that takes such a job from
    a live status to a finished one, whichever write it is."""

    def __init__(self, log: InMemoryEventLog, awaited: Callable[[uuid.UUID], bool]) -> None:
        super().__init__(log)
        self.awaited = awaited
        self.ends: deque[Ended] = deque()

    def __setitem__(self, key: Any, value: Job) -> None:
        old = self.get(key)
        super().__setitem__(key, value)
        ended = old is not None and not old.status.is_finished and value.status.is_finished
        if ended and self.awaited(key):
            self.ends.append(Ended(key, value.status))


class MemoryWaits:
    """Dependencies and batches in memory (mixed into :class:`~jobs_core.memory.InMemoryJobStore`,
    whose table, lock and helpers it uses)."""

    _jobs: dict[uuid.UUID, Job]
    _lock: threading.RLock

    def _init_waits(self, log: InMemoryEventLog) -> WaitedJobs:
        self._edges: dict[uuid.UUID, dict[uuid.UUID, Status | None]] = {}
        """Per waiter, the jobs it awaits (in order) and how each ended (None: not yet)."""
        self._waiters: dict[uuid.UUID, list[uuid.UUID]] = {}
        """Per awaited job, its waiters."""
        self._rules: dict[uuid.UUID, WaitRule] = {}
        self._waited = WaitedJobs(log, lambda job_id: job_id in self._waiters)
        return self._waited

    if TYPE_CHECKING:  # InMemoryJobStore's, which this part uses

        def _insert(self, new: NewJob, now: datetime, job_id: uuid.UUID | None) -> Job | None: ...

        def insert_many(self, new: Sequence[NewJob], now: datetime) -> list[Job]: ...

        def _mark_hook(self, job_id: uuid.UUID, due_at: datetime | None) -> None: ...

        def _work_available(self) -> None: ...

    # -- the Waits role ---------------------------------------------------------------------
    def insert_after(
        self, new: NewJob, depends_on: Sequence[uuid.UUID], rule: WaitRule, now: datetime
    ) -> Job | None:
        """Insert ``new`` waiting for the org's jobs ``depends_on`` (:func:`waits.start`)."""
        with self._lock:
            found = [self._jobs.get(job_id) for job_id in depends_on]
            missing = [
                job_id
                for job_id, job in zip(depends_on, found, strict=True)
                if job is None or job.org_id != new.org_id
            ]
            if missing:
                raise DependencyInvalid(
                    f"depends_on names {len(missing)} job(s) that are not jobs of the org",
                    missing,
                )
            inserted = self._insert(new, now, None)
            if inserted is None:
                return None
            awaited = [Ended(job.id, job.status) for job in found if job is not None]
            return self._wait(inserted, awaited, rule, now)

    def insert_batch(
        self, members: Sequence[NewJob], callback: NewJob, now: datetime
    ) -> tuple[list[Job], Job]:
        """The members, then the callback waiting for those inserted (``ALL_ENDED``)."""
        with self._lock:
            inserted = self.insert_many(members, now)
            job = self._insert(dataclasses.replace(callback, dedup_key=None), now, None)
            assert job is not None  # no key: never refused
            awaited = [Ended(member.id, member.status) for member in inserted]
            return inserted, self._wait(job, awaited, WaitRule.ALL_ENDED, now)

    def _wait_for_children(self, parent: Job, change: Patch, inserted: Sequence[Job]) -> Job:
        """The parent a :class:`~jobs_core.outcomes.Wait` left ``waiting``, with the edges to
        its children (:func:`parents.awaited_children`), released at once if they have all
        ended (decision 0043)."""
        found = {cid: job.status for cid in change.awaits if (job := self._jobs.get(cid))}
        awaited = parents.awaited_children(inserted, change.awaits, found)
        assert change.ended_at is not None
        return self._wait(parent, awaited, WaitRule.ALL_ENDED, change.ended_at)

    def _wait(self, job: Job, awaited: Sequence[Ended], rule: WaitRule, now: datetime) -> Job:
        """Record ``job``'s edges (after those it has: a parent may wait again) and write its
        status as :func:`waits.start` gives it."""
        edges = self._edges.setdefault(job.id, {})
        for end in awaited:
            if end.id not in edges:
                self._waiters.setdefault(end.id, []).append(job.id)
            edges[end.id] = end.status if end.status.is_finished else None
        self._rules[job.id] = rule
        started = waits.start(job, rule, awaited, now).job
        return self._write(job, started, now)

    def _write(self, before: Job, after: Job, now: datetime) -> Job:
        if after != before:
            self._jobs[after.id] = after
            if after.status is Status.CANCELLED:
                self._mark_hook(after.id, domain.end_hook_due(after.status, now, by_worker=False))
            if after.status is Status.QUEUED:
                self._work_available()
        return after

    def release_waiting(self, now: datetime, limit: int, release: Release) -> list[Job]:
        """Take up to ``limit`` recorded ends and release their waiters, in id order."""
        with self._lock:
            ends = self._waited.ends
            taken = [ends.popleft() for _ in range(min(limit, len(ends)))]
            news: dict[uuid.UUID, list[Ended]] = {}
            for end in taken:
                for waiter in self._waiters.get(end.id, ()):
                    edges = self._edges[waiter]
                    if edges.get(end.id, Status.DONE) is None:  # each edge ends once
                        edges[end.id] = end.status
                        news.setdefault(waiter, []).append(end)
            changed = []
            for waiter in sorted(news):
                job = self._jobs.get(waiter)
                if job is None:
                    continue
                left = sum(1 for status in self._edges[waiter].values() if status is None)
                ended = tuple(news[waiter])
                waiting = waits.Waiting(job, left + len(ended), self._rules[waiter], ended)
                after = release(waiting, now).job
                if after != job:
                    changed.append(self._write(job, after, now))
            return changed

    def awaited(self, org_id: str, job_id: uuid.UUID) -> list[Awaited] | None:
        """The jobs the org's job awaits, in the order given."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.org_id != org_id:
                return None
            found = [self._jobs.get(awaited) for awaited in self._edges.get(job_id, {})]
            return [Awaited(j.id, j.type, j.status) for j in found if j is not None]
