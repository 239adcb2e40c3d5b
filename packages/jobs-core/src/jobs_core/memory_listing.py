"""The in-memory store's listed reads (:meth:`jobs_core.ports.OrgJobs.list_jobs`,
``children_counts``, :meth:`jobs_core.ports.OperatorReads.list_all_orgs`): the filters of
:class:`jobs_core.ports.JobFilter` and the rules of :mod:`jobs_core.listing` applied to the jobs
it holds (a part of :class:`jobs_core.memory.InMemoryJobStore`)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from datetime import datetime

from jobs_core.domain import Job
from jobs_core.listing import ChildCounts, count_children, elide
from jobs_core.ports import JobFilter


def queue_order(job: Job) -> tuple[datetime, uuid.UUID]:
    """Oldest first: ``(created_at, id)``, the list's keyset (newest first reversed)."""
    return (job.created_at, job.id)


class MemoryListing:
    """The listed reads over the store's dict of jobs."""

    _lock: threading.RLock
    _jobs: dict[uuid.UUID, Job]

    def list_jobs(self, org_id: str, query: JobFilter) -> list[Job]:
        """The org's jobs, newest first."""
        return self._listed(org_id, query)

    def list_all_orgs(self, query: JobFilter) -> list[Job]:
        """The jobs of every org matching ``query``, newest first."""
        return self._listed(None, query)

    def _listed(self, org_id: str | None, query: JobFilter) -> list[Job]:
        """The jobs of ``org_id`` (of every org with None) matching ``query``, newest first."""
        with self._lock:
            rows = [
                j
                for j in self._jobs.values()
                if (org_id is None or j.org_id == org_id)
                and (query.statuses is None or j.status in query.statuses)
                and (query.type is None or j.type == query.type)
                and (query.parent_id is None or j.parent_id == query.parent_id)
                and (query.before is None or (j.created_at, j.id) < query.before)
            ]
        rows.sort(key=queue_order, reverse=True)
        return [elide(job, query.field_bytes) for job in rows[: max(0, query.limit)]]

    def children_counts(
        self, org_id: str, parent_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, ChildCounts]:
        """The children of each of ``parent_ids`` that has some, counted
        (:func:`jobs_core.listing.count_children`)."""
        if not parent_ids:
            return {}
        with self._lock:
            own = [job for job in self._jobs.values() if job.org_id == org_id]
        return count_children(own, parent_ids)
