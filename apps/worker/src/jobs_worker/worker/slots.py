"""The slots: ``concurrency`` threads, each running one attempt at a time.

:meth:`Slots.start` makes a claimed job an attempt this worker holds (its context, its fence
watch) and queues it for a slot; :meth:`Slots.serve` is a slot's thread: it runs the attempt
through :func:`jobs_core.runner.run_attempt` (an async handler on an event loop of its own), and
hands the outcome on (:meth:`Claimer.slot_freed <jobs_worker.worker.claiming.Claimer.slot_freed>`).
A handler past its timeout keeps its slot until its code stops, at most ``timeout_grace_s``; then
the worker is wedged and exits (docs/worker.md, "Timeouts"). The queue is closed with one ``None``
per slot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobs_core import Job, JobContext
from jobs_core.errors import is_outage
from jobs_core.runner import fenced_outcome, run_attempt, short_error

from jobs_worker.handler_calls import AttemptCalls
from jobs_worker.logs import log_event
from jobs_worker.worker.config import EXIT_WEDGED
from jobs_worker.worker.state import Attempt, Completion, Phase, Shared

log = logging.getLogger("jobs.worker")

Freed = Callable[[Attempt, Completion], bool]
"""Told a slot's attempt ended with its completion; True if it had been handed back."""


class Slots:
    """The slots of one worker."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.service = shared.service
        self.clock = shared.clock
        self.fence = shared.fence
        self._lock = shared.lock
        self._queue = shared.slots

    def start(self, job: Job, proven_at: float) -> None:
        """Hold ``job`` (claimed: its lease proven at ``proven_at``) and queue it for a slot."""
        shared = self.shared
        calls = shared.handler_calls.for_attempt()
        attempt = Attempt(job, self._context(job, calls), time.monotonic(), calls)
        with self._lock:
            shared.held[job.id] = attempt
            shared.executing += 1
            shared.stats["claimed"] += 1

        def fence(reason: str) -> None:
            attempt.fenced = reason
            attempt.ctx.cancel(reason)
            attempt.calls.fence()  # a progress write it waits for must not hold it

        self.fence.track(job.id, proven_at, fence)
        # At DEBUG: at INFO a job is one line, written when it ends (job.finished, with its
        # attempt, duration and outcome). A second line per job cost a quarter of the worker's
        # CPU per job of a drain (bench/NOTES.md §3); which job a crashed worker was running
        # is in the table (running, started_at, attempts) and in the sweep's job.swept line.
        log_event(
            log,
            logging.DEBUG,
            "job.started",
            job_id=job.id,
            type=job.type,
            org=job.org_id,
            attempt=job.attempts,
            max_attempts=job.max_attempts,
        )
        self._queue.put(attempt)

    def _context(self, job: Job, calls: AttemptCalls) -> JobContext:
        ref = job.ref
        service, fence = self.service, self.fence

        def save_progress(document: Mapping[str, Any]) -> bool:
            if not fence.claiming_allowed:
                # The link is known silent: a write would only block the handler, which must
                # be free to see its cancellation (docs/worker.md, "The lease fence").
                return True
            try:
                # Waited for only while the lease holds: a write blocked on a silent link must
                # not keep a fenced handler from stopping (jobs_worker.handler_calls).
                copy = dict(document)
                ended, saved = calls.run(lambda: service.save_progress(ref, copy))
                return bool(saved) if ended else True
            except Exception as error:
                if not is_outage(error):
                    raise
                # The heartbeat keeps the job alive; only this progress document is lost.
                log_event(
                    log,
                    logging.WARNING,
                    "job.progress_not_saved",
                    job_id=job.id,
                    error=short_error(error),
                )
                return True

        return JobContext(job, progress_sink=save_progress, now=self.clock.now)

    def serve(self, freed: Freed) -> None:
        """A slot's thread: run attempts until the queue is closed; ``freed`` takes each
        outcome."""
        registry, now = self.service.registry, self.clock.now
        while (attempt := self._queue.get()) is not None:

            def overrun(thread: threading.Thread, attempt: Attempt = attempt) -> None:
                attempt.overrun = thread

            outcome = run_attempt(registry, attempt.ctx, now, on_overrun=overrun)
            self.fence.stopped(attempt.job.id)
            outcome = fenced_outcome(outcome, attempt.fenced, attempt.cancel_requested, now)
            completion = Completion(attempt, outcome, time.monotonic() - attempt.started)
            if attempt.overrun is not None:
                if not self._linger(attempt, completion, attempt.overrun):
                    return  # the worker is wedged and exits; this thread stays with the code
                continue
            if freed(attempt, completion):
                # Its attempt was already given back to the queue; this result is moot.
                log_event(
                    log,
                    logging.INFO,
                    "job.stopped_after_hand_back",
                    job_id=attempt.job.id,
                    outcome=type(outcome).__name__.lower(),
                )

    def _linger(self, attempt: Attempt, completion: Completion, thread: threading.Thread) -> bool:
        """The handler overran its timeout: its failure is written now, but its slot stays
        counted as busy until its code really stops (no hidden oversubscription). Past
        ``timeout_grace_s`` the worker is wedged (:meth:`_wedged`); False then."""
        shared = self.shared
        with self._lock:
            if attempt.phase is not Phase.HANDED_BACK:
                attempt.phase = Phase.COMPLETING
                shared.completions.put(completion)
        grace = shared.config.timeout_grace_s
        log_event(
            log,
            logging.WARNING,
            "job.overrun",
            job_id=attempt.job.id,
            type=attempt.job.type,
            grace_s=grace,
            note="failed at its timeout; its slot stays busy until the handler's code stops",
        )
        deadline = time.monotonic() + grace
        while thread.is_alive():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._wedged(
                    f"the handler of job {attempt.job.id} ({attempt.job.type}) still runs"
                    f" {grace:g} s after its timeout"
                )
                return False
            thread.join(min(remaining, 0.5))
        with self._lock:
            shared.executing -= 1
            shared.idle.notify_all()
        shared.kick.set()
        return True

    def _wedged(self, reason: str) -> None:
        """A handler will not stop: stop claiming, hand the other jobs back, exit with
        :data:`EXIT_WEDGED` so the supervisor starts a fresh process."""
        shared = self.shared
        with self._lock:
            if shared.exit_code:
                return
            shared.exit_code = EXIT_WEDGED
        log_event(log, logging.CRITICAL, "worker.wedged", code=EXIT_WEDGED, reason=reason)
        shared.stop(graceful=False)
