"""The in-memory store's :class:`jobs_core.ports.Overview`: the rules of
:mod:`jobs_core.overview` applied to the jobs and attempt records it holds (a part of
:class:`jobs_core.memory.InMemoryJobStore`)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter, defaultdict
from datetime import datetime

from jobs_core.domain import Job, Status
from jobs_core.history import AttemptRecord
from jobs_core.overview import (
    BucketFacts,
    Window,
    bucket_start,
    has_short_id,
    percentile,
    prefix_bounds,
    wait_s,
    window_start,
)


class MemoryOverview:
    """The Overview role over the store's dict of jobs and of attempt records."""

    _lock: threading.RLock
    _jobs: dict[uuid.UUID, Job]
    _attempts: dict[uuid.UUID, list[AttemptRecord]]

    def _org_jobs(self, org_id: str) -> list[Job]:
        with self._lock:
            return [job for job in self._jobs.values() if job.org_id == org_id]

    def type_counts(
        self, org_id: str, statuses: frozenset[Status] | None, type_name: str | None
    ) -> list[tuple[str, Status, int]]:
        """The org's jobs counted per type and status, filtered as a list."""
        counted = Counter(
            (job.type, job.status)
            for job in self._org_jobs(org_id)
            if (statuses is None or job.status in statuses)
            and (type_name is None or job.type == type_name)
        )
        return [(t, s, n) for (t, s), n in counted.items()]

    def series(self, org_id: str, window: Window, now: datetime) -> list[BucketFacts]:
        """Per type and bucket: the finished jobs, their waits, the attempts' run times."""
        start = window_start(window, now)
        counts: Counter[tuple[str, datetime, Status]] = Counter()
        waits: defaultdict[tuple[str, datetime], list[float]] = defaultdict(list)
        runs: defaultdict[tuple[str, datetime], list[float]] = defaultdict(list)
        jobs = self._org_jobs(org_id)
        with self._lock:
            records = {job.id: list(self._attempts.get(job.id, ())) for job in jobs}
        for job in jobs:
            if job.finished_at is not None and job.finished_at >= start and job.status.is_finished:
                key = (job.type, bucket_start(job.finished_at, window.bucket))
                counts[(*key, job.status)] += 1
                waited = wait_s(job.created_at, job.run_at, job.started_at)
                if waited is not None:
                    waits[key].append(waited)
            for record in records[job.id]:
                if record.ended_at >= start:
                    runs[(job.type, bucket_start(record.ended_at, window.bucket))].append(
                        record.duration_s
                    )
        keys = {(t, b) for t, b, _ in counts} | set(runs)
        return [
            BucketFacts(
                type=t,
                start=b,
                done=counts[(t, b, Status.DONE)],
                failed=counts[(t, b, Status.FAILED)],
                cancelled=counts[(t, b, Status.CANCELLED)],
                wait_p50=percentile(waits[(t, b)], 0.5),
                wait_p95=percentile(waits[(t, b)], 0.95),
                run_p50=percentile(runs[(t, b)], 0.5),
                run_p95=percentile(runs[(t, b)], 0.95),
            )
            for t, b in sorted(keys)
        ]

    def find_by_prefix(self, org_id: str, prefix: str, limit: int) -> list[Job]:
        """The org's jobs whose id starts with ``prefix``, by id."""
        low, high = prefix_bounds(prefix)
        found = [job for job in self._org_jobs(org_id) if low <= job.id <= high]
        return sorted(found, key=lambda job: job.id)[: max(0, limit)]

    def find_by_short_id(self, org_id: str, short: str, limit: int) -> list[Job]:
        """The org's jobs whose id ends with ``short``, by id."""
        found = [job for job in self._org_jobs(org_id) if has_short_id(job.id, short)]
        return sorted(found, key=lambda job: job.id)[: max(0, limit)]
