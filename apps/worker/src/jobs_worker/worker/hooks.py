"""The hook pass: runs the due end hooks (``on_fail``, ``on_cancel``) of jobs this worker did not
end itself, every ``poll_interval_s`` (decision 0025, docs/lifecycle.md); and, in the same loop,
the release pass of jobs that wait for others (decision 0041, docs/flows.md): the recorded ends of
awaited jobs, each taken once by one worker, their waiters queued or cancelled by the core's rule
(:meth:`jobs_core.JobService.release_waiting`). A waiting job is released within
``poll_interval_s`` of the end of the last job it waits for.

A thread of its own. The jobs this worker ends get their hook at once, from the outcome's write
(:meth:`jobs_core.JobService.complete_many`); this pass takes the others: a job cancelled while
queued (by the API or the CLI, no worker involved), or one whose worker died between its end and
its hook. The rule (which rows are due, taken ``SKIP LOCKED``, made due again later, cleared once
the hook ran) is the core's (:meth:`jobs_core.JobService.run_end_hooks`). A pass that found a
full batch runs again at once. A failed call is retried with backoff. It ends when ``halt`` is
set.
"""

from __future__ import annotations

from jobs_worker.worker.state import Shared

HOOK_BATCH = 100
"""Due end hooks taken per pass at most."""

RELEASE_BATCH = 500
"""Recorded ends of awaited jobs taken per pass at most."""


class HookPass:
    """The end hooks' pass of one worker."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def serve(self) -> None:
        """The hook pass's thread."""
        cfg, halt = self.shared.config, self.shared.halt
        retry = self.shared.retry("end_hooks")
        delay = 0.0
        while not halt.wait(delay):
            try:
                full = self.run_once() == HOOK_BATCH
                full = self.release_once() or full
            except Exception as error:
                delay = max(cfg.poll_interval_s, retry.failed(error))
            else:
                retry.succeeded()
                delay = 0.0 if full else cfg.poll_interval_s

    def run_once(self) -> int:
        """One pass over the due end hooks of this worker's types; how many it took."""
        return self.shared.service.run_end_hooks(HOOK_BATCH)

    def release_once(self) -> bool:
        """One release pass; whether it changed a waiter (then there may be more at once: a
        waiter it cancelled may itself be awaited)."""
        return bool(self.shared.service.release_waiting(RELEASE_BATCH))
