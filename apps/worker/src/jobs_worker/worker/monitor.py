"""The monitor: heartbeats the held jobs and checks the running ones for cancellation requests.

A thread of its own. Every ``cancel_check_s`` it asks which executing attempts were asked to
stop and cancels their contexts (:meth:`Monitor.check_cancellations`); every ``heartbeat_s`` it
writes the sign of life of every held attempt (:meth:`Monitor.heartbeat`, docs/contract.md §5),
tells the lease fence which leases it proved, and cancels the context of an executing attempt
whose lease is gone. A failed call is retried sooner, with backoff. It ends when ``halt`` is set.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from jobs_core import CancelReason

from jobs_worker.logs import log_event
from jobs_worker.worker.state import Attempt, Phase, Shared

log = logging.getLogger("jobs.worker")

_WATCHED = (Phase.BUFFERED, Phase.EXECUTING)
"""The phases whose context a cancellation or a lost lease cancels (a buffered attempt is then
ended without running its handler)."""


class Monitor:
    """Heartbeats and cancellation checks of one worker's attempts."""

    def __init__(self, shared: Shared, withdraw: Callable[[Attempt], bool]) -> None:
        self.shared = shared
        self.service = shared.service
        self._withdraw = withdraw  # ends a cancelled attempt still waiting for a slot

    def serve(self) -> None:
        """The monitor's thread."""
        cfg, halt = self.shared.config, self.shared.halt
        beats = self.shared.retry("heartbeat")
        checks = self.shared.retry("cancel_check")
        next_beat = time.monotonic() + cfg.heartbeat_s
        next_check = time.monotonic() + cfg.cancel_check_s
        while True:
            wait = max(0.0, min(next_beat, next_check) - time.monotonic())
            if halt.wait(wait):
                return
            now = time.monotonic()
            if now >= next_check:
                try:
                    self.check_cancellations()
                except Exception as error:
                    next_check = now + max(cfg.cancel_check_s, checks.failed(error))
                else:
                    checks.succeeded()
                    next_check = now + cfg.cancel_check_s
            if now >= next_beat:
                try:
                    self.heartbeat()
                except Exception as error:
                    # Retry soon: a missed heartbeat brings the job closer to the sweep.
                    next_beat = now + min(cfg.heartbeat_s, beats.failed(error))
                else:
                    beats.succeeded()
                    next_beat = now + cfg.heartbeat_s

    def check_cancellations(self) -> set[uuid.UUID]:
        """Cancel the context of every running job whose cancellation was requested; their ids."""
        with self.shared.lock:
            watched = [
                a
                for a in self.shared.held.values()
                if a.phase in _WATCHED and not a.cancel_requested
            ]
        if not watched:
            return set()
        requested = self.service.cancel_requested([a.ref for a in watched])
        for attempt in watched:
            if attempt.job.id in requested:
                attempt.cancel_requested = True
                attempt.ctx.cancel(CancelReason.REQUESTED)
                self._withdraw(attempt)
                log_event(
                    log,
                    logging.INFO,
                    "job.cancel_requested",
                    job_id=attempt.job.id,
                    type=attempt.job.type,
                    org=attempt.job.org_id,
                    attempt=attempt.job.attempts,
                )
        return requested

    def heartbeat(self) -> set[uuid.UUID]:
        """Refresh the sign of life of every held job; cancel those whose lease is gone.
        Returns the ids still held."""
        with self.shared.lock:
            held = list(self.shared.held.values())
        if not held:
            return set()
        sent = time.monotonic()  # the beat written is no older than this
        alive = self.service.heartbeat([a.ref for a in held])
        self.shared.fence.proved(alive, sent)
        for attempt in held:
            # Only a job executing or waiting for a slot can have lost its lease unseen: a
            # completing one is being written (the write itself is fenced), a handed-back one
            # was given away.
            if attempt.job.id not in alive and attempt.phase in _WATCHED:
                attempt.ctx.cancel(CancelReason.LEASE_LOST)
                self._withdraw(attempt)
                log_event(
                    log,
                    logging.WARNING,
                    "job.lease_lost",
                    job_id=attempt.job.id,
                    type=attempt.job.type,
                    org=attempt.job.org_id,
                    attempt=attempt.job.attempts,
                    note="the handler's context is cancelled",
                )
        return alive
