"""A worker process makes itself known: registered while it runs, gone when it stops.

The registry is a role of every store (:class:`jobs_core.workers.WorkerRegistry`, one of the
ports :class:`jobs_core.JobStore` is made of, decision 0031): one row per worker process with
its host, pid, the types it serves and its concurrency, refreshed every :data:`BEAT_S`. A worker
killed without a word stops refreshing it and is no longer live after
:data:`jobs_core.workers.WORKER_SILENT_S`. Operators list them with ``jobs workers``; "why is
this job waiting?" uses them to say that no live worker serves a type.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace

from jobs_core.ports import Clock
from jobs_core.workers import WORKER_SILENT_S, WorkerInfo, WorkerRegistry

from jobs_worker.logs import log_event

log = logging.getLogger("jobs.worker.presence")

BEAT_S = WORKER_SILENT_S / 4
"""How often a worker refreshes its row: three beats may be lost before it looks silent."""


class Presence:
    """The registration of one worker process; :meth:`run` until ``halt`` is set."""

    def __init__(
        self,
        registry: WorkerRegistry,
        clock: Clock,
        types: Sequence[str],
        concurrency: int,
        halt: threading.Event,
        *,
        beat_s: float = BEAT_S,
    ) -> None:
        now = clock.now()
        self.info = WorkerInfo(
            id=uuid.uuid4(),
            host=socket.gethostname(),
            pid=os.getpid(),
            types=tuple(types),
            concurrency=concurrency,
            started_at=now,
            last_seen_at=now,
        )
        self._registry = registry
        self._clock = clock
        self._halt = halt
        self._beat_s = beat_s

    def run(self) -> None:
        """Register, refresh every beat (registering again if the row was forgotten), and
        remove the row when ``halt`` is set. Store errors are logged and retried next beat:
        presence never stops a worker from working."""
        registered = False
        try:
            while True:
                try:
                    now = self._clock.now()
                    if not registered or not self._registry.worker_seen(self.info.id, now):
                        self._registry.register_worker(replace(self.info, last_seen_at=now))
                        if not registered:
                            log_event(log, logging.INFO, "worker.registered", id=self.info.id)
                        registered = True
                except Exception as error:
                    log_event(
                        log, logging.WARNING, "worker.presence_failed", error=str(error)[:200]
                    )
                if self._halt.wait(self._beat_s):
                    return
        finally:
            try:
                self._registry.unregister_worker(self.info.id)
            except Exception as error:  # it goes silent instead, and is forgotten
                log_event(log, logging.WARNING, "worker.unregister_failed", error=str(error)[:200])
