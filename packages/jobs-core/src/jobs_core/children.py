"""Jobs a handler enqueues: its children (``ctx.enqueue``, decision 0038).

A child is of the running job's org and names it as its ``parent_id``. By default it is
*deferred*: held by the context and written by the store in the same write as the attempt's
outcome, only when the attempt ends ``done`` (:func:`children_due`). An attempt
that fails, is retried, snoozes, is cancelled or loses its job leaves none; a worker killed
between the handler's return and that write leaves none either, and the re-run enqueues them
once. With ``immediately=True`` the child is enqueued at once, whatever the attempt then comes
to (a re-run enqueues it again unless a dedup key holds it).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobs_core.domain import Job, NewJob, Patch, Status

if TYPE_CHECKING:
    from jobs_core.registry import Registry

ChildEnqueuer = Callable[[Sequence[NewJob]], list[Job]]
"""Enqueues children at once (:meth:`jobs_core.JobService.enqueue_children`): one spec is an
enqueue with its dedup loop (the holder of its key comes back), several are one bulk insert
(those whose key is held are skipped)."""

ChildAdmission = Callable[[str, int], None]
"""Admits ``count`` children of an org under its quotas, or raises
:class:`~jobs_core.quotas.QuotaExceeded` (:meth:`jobs_core.quota_service.QuotaService.admit`,
what ``POST /jobs`` admits an enqueue through)."""

CHILDREN_MAX = 10_000
"""The most deferred children one attempt may hold (they travel with its outcome)."""


class Children:
    """The children of one attempt: resolved against the registry at once (an unregistered type
    or a bad payload raises in the handler), then held or enqueued."""

    def __init__(
        self,
        job: Job,
        registry: Registry | None,
        enqueuer: ChildEnqueuer | None,
        admit: ChildAdmission | None = None,
    ) -> None:
        self._job = job
        self._registry = registry
        self._enqueuer = enqueuer
        self._admit = admit
        self._held: list[NewJob] = []
        self._enqueued: dict[uuid.UUID, None] = {}
        self._lock = threading.Lock()

    @property
    def held(self) -> tuple[NewJob, ...]:
        """The deferred children, in the order they were enqueued."""
        with self._lock:
            return tuple(self._held)

    @property
    def enqueued(self) -> tuple[uuid.UUID, ...]:
        """The ids of the children enqueued at once (``immediately=True``; the holder of a held
        dedup key among them), in order, each once."""
        with self._lock:
            return tuple(self._enqueued)

    def _registered(self) -> Registry:
        if self._registry is None:
            raise RuntimeError(
                "this context cannot enqueue children (a child-process handler, or a context"
                " built without a registry)"
            )
        return self._registry

    def _own(self, spec: NewJob) -> NewJob:
        return dataclasses.replace(spec, org_id=self._job.org_id, parent_id=self._job.id)

    def enqueue(
        self,
        type_name: str,
        payload: Mapping[str, Any] | None,
        *,
        dedup_key: str | None,
        run_at: datetime | None,
        priority: int,
        immediately: bool,
    ) -> Job | None:
        spec = self._registered().new_job(
            self._job.org_id,
            type_name,
            payload,
            dedup_key=dedup_key,
            run_at=run_at,
            priority=priority,
        )
        written = self._take([self._own(spec)], immediately)
        return written[0] if written else None

    def enqueue_many(
        self,
        type_name: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        dedup_keys: Sequence[str | None] | None,
        priority: int,
        immediately: bool,
    ) -> list[Job]:
        specs = self._registered().new_jobs(
            self._job.org_id, type_name, payloads, dedup_keys=dedup_keys, priority=priority
        )
        if dedup_keys is not None and len(dedup_keys) != len(specs):
            raise ValueError("dedup_keys must have one entry per payload")
        return self._take([self._own(spec) for spec in specs], immediately)

    def _take(self, specs: list[NewJob], immediately: bool) -> list[Job]:
        if not specs:
            return []
        if self._admit is not None:  # the org's quotas, as for any enqueue
            self._admit(self._job.org_id, len(specs))
        if immediately:
            if self._enqueuer is None:
                raise RuntimeError("this context cannot enqueue children at once (no enqueuer)")
            written = self._enqueuer(specs)
            with self._lock:
                self._enqueued.update(dict.fromkeys(job.id for job in written))
            return written
        with self._lock:
            if len(self._held) + len(specs) > CHILDREN_MAX:
                raise ValueError(
                    f"more than {CHILDREN_MAX} children held by one attempt: enqueue them with"
                    " immediately=True, or from a job of their own"
                )
            self._held.extend(specs)
        return []


_WITH_CHILDREN = (Status.DONE, Status.WAITING)


def children_due(change: Patch, written: Job | None) -> tuple[NewJob, ...]:
    """The children a store inserts with ``change`` (decision 0038): those of a patch that
    applied (``written``, the job as it wrote it, is not None) and ended the job ``done``, or
    left it ``waiting`` for them (decision 0043). An
    attempt that failed, was re-queued, or no longer held its job leaves none behind, and a
    re-run after a lost write enqueues them once (the write and the children commit together).
    Each child is of the parent's org and names it as its parent."""
    if not change.children or written is None or written.status not in _WITH_CHILDREN:
        return ()
    return tuple(
        dataclasses.replace(child, org_id=written.org_id, parent_id=written.id)
        for child in change.children
    )
