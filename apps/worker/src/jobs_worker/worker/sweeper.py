"""The sweeper: re-queues or fails the zombies, at start and every ``sweep_interval_s``.

A thread of its own; the rule (which zombie goes back to the queue, fails, or ends cancelled) is
the core's (:meth:`jobs_core.JobService.sweep`, docs/contract.md §5). This worker's own jobs are
heartbeaten first (:meth:`Monitor.heartbeat <jobs_worker.worker.monitor.Monitor.heartbeat>`).
A sweep that changed jobs wakes the completer (it claims). It ends when ``halt`` is set.
"""

from __future__ import annotations

import logging

from jobs_worker.logs import log_event
from jobs_worker.worker.monitor import Monitor
from jobs_worker.worker.state import Shared

log = logging.getLogger("jobs.worker")


class Sweeper:
    """The sweeps of one worker."""

    def __init__(self, shared: Shared, monitor: Monitor) -> None:
        self.shared = shared
        self.monitor = monitor

    def serve(self) -> None:
        """The sweeper's thread."""
        cfg = self.shared.config
        retry = self.shared.retry("sweep")
        while True:
            try:
                self.sweep()
            except Exception as error:
                delay = min(cfg.sweep_interval_s, retry.failed(error))
            else:
                retry.succeeded()
                delay = cfg.sweep_interval_s
            if self.shared.halt.wait(delay):
                return

    def sweep(self) -> int:
        """Re-queue or fail the zombies once (docs/contract.md §5); how many jobs it changed.

        This worker's own jobs are heartbeaten first: after an outage longer than the threshold
        their last heartbeat is old, yet they are alive (a finished one only waits for its
        outcome to be written) and must not be swept by their own worker.
        """
        self.monitor.heartbeat()
        report = self.shared.service.sweep(self.shared.config.sweep_threshold_s)
        changed = [*report.requeued, *report.failed, *report.cancelled]
        for job in changed:
            log_event(
                log,
                logging.WARNING,
                "job.swept",
                job_id=job.id,
                type=job.type,
                org=job.org_id,
                attempt=job.attempts,
                outcome=job.status.value,
                error=job.error,
            )
        if changed:
            self.shared.wake()
        return len(changed)
