"""Workers are known: each worker process registers itself and shows it is alive.

A worker inserts its :class:`WorkerInfo` when it starts, refreshes ``last_seen_at`` with its
heartbeat and removes itself when it stops. One that goes silent for :data:`WORKER_SILENT_S`
(killed, its machine gone) is no longer live and is removed by the next registration or
listing. Operators list them (``jobs workers``); tenants only ever learn whether a live worker
serves a job's type (docs/flow-control.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

WORKER_SILENT_S = 60.0
"""A worker not seen for this long is not live (its heartbeat runs every few seconds)."""


def live_after(now: datetime) -> datetime:
    """The instant after which a worker's last sign of life makes it live."""
    return now - timedelta(seconds=WORKER_SILENT_S)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker process as the registry holds it."""

    id: uuid.UUID
    host: str
    pid: int
    types: tuple[str, ...]
    concurrency: int
    started_at: datetime
    last_seen_at: datetime


class WorkerRegistry(Protocol):
    """Where worker processes are recorded (both stores implement it)."""

    def register_worker(self, worker: WorkerInfo) -> None:
        """Record a worker (and forget those silent for too long)."""
        ...

    def worker_seen(self, worker_id: uuid.UUID, now: datetime) -> bool:
        """Refresh a worker's ``last_seen_at``; False if it is not registered (any more)."""
        ...

    def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove a worker that stops."""
        ...

    def live_workers(self, now: datetime) -> Sequence[WorkerInfo]:
        """The live workers, oldest first (and forget the silent ones)."""
        ...
