"""The worker registry on PostgreSQL (the ``WorkerRegistry`` role of the job store): live
worker processes, their types and slots, forgotten once silent (``job_workers``). The list of
the live ones is read by ``jobs_postgres.reads.JobReads.live_workers`` (``jobs workers`` reads
it without the store)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from jobs_core.workers import WorkerInfo, live_after

from jobs_postgres import flow
from jobs_postgres.connections import StoreConnections


class WorkerRegistryRows(StoreConnections):
    """:class:`jobs_core.ports.WorkerRegistry` on ``job_workers``, one statement (or one short
    transaction) per call; :class:`~jobs_postgres.store.PostgresJobStore` is one."""

    def register_worker(self, worker: WorkerInfo) -> None:
        """Record a worker (and forget those silent for too long)."""
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "types": list(worker.types),
            "concurrency": worker.concurrency,
            "started_at": worker.started_at,
            "last_seen_at": worker.last_seen_at,
            "live_after": live_after(worker.last_seen_at),
        }

        def run(execute: Callable[[str, Mapping[str, Any]], list[Any]]) -> None:
            execute(flow.FORGET_SILENT + " RETURNING id", params)
            execute(flow.REGISTER + " RETURNING id", params)

        self._in_transaction(run)

    def worker_seen(self, worker_id: uuid.UUID, now: datetime) -> bool:
        """Refresh a worker's ``last_seen_at``; False if it is not registered (any more)."""
        row = self._on_driver(lambda execute, _: execute(flow.SEEN, {"id": worker_id, "now": now}))
        return row is not None

    def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove a worker that stops."""
        self._on_driver(
            lambda execute, _: execute(flow.UNREGISTER + " RETURNING id", {"id": worker_id})
        )
