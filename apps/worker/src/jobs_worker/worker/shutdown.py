"""The shutdown: stop claiming, let the running jobs finish, hand the others back, write the rest.

Runs on the claim loop's thread once the loop ends (:meth:`Worker.stop
<jobs_worker.worker.Worker.stop>`, a wedged handler). In order: wait for a claim in flight
(``claim_lock``); wait up to ``shutdown_grace_s`` for the slots to free up (``idle``; not at all
when forced); hand the jobs still executing back to the queue (:meth:`Shutdown.hand_back`, the
choice is the core's :func:`jobs_core.domain.hand_back_outcome`); close the slots' queue; close
the completer's queue (under ``claim_lock``) and let it write what it has, giving up
(``give_up_writes``) when forced or past the grace; then stop the housekeeping threads
(``halt``), the fence and the handlers' helper threads.
"""

from __future__ import annotations

import logging
import threading
import time

from jobs_core import AttemptRef, Job, Outcome, Wakeup
from jobs_core.domain import hand_back_outcome
from jobs_core.errors import is_outage

from jobs_worker.logs import log_event
from jobs_worker.worker.state import Phase, Shared

log = logging.getLogger("jobs.worker")

HANDED_BACK = "the worker shut down before the job finished"


class Shutdown:
    """The end of one worker."""

    def __init__(self, shared: Shared, wakeup: Wakeup) -> None:
        self.shared = shared
        self.wakeup = wakeup

    def run(
        self,
        slots: list[threading.Thread],
        completer: threading.Thread,
        housekeeping: list[threading.Thread],
    ) -> None:
        """Stop the worker whose threads these are (see the module's docstring)."""
        shared, cfg = self.shared, self.shared.config
        deadline = time.monotonic() + cfg.shutdown_grace_s
        with shared.claim_lock:
            pass  # a claim a slot started before the stop is over; no other can begin
        with shared.lock:
            running = shared.executing
        log_event(
            log,
            logging.INFO,
            "worker.stopping",
            running=running,
            grace_s=cfg.shutdown_grace_s,
            forced=shared.force.is_set(),
        )
        with shared.lock:
            while shared.executing and not shared.force.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                shared.idle.wait(min(remaining, 0.1))
        self.hand_back(deadline)
        for _ in slots:
            shared.slots.put(None)
        # Outcomes already produced are written; through an outage, until the grace is spent.
        # Closed under the claim lock: a slot writing outcomes with its claim holds it, and
        # hands them to the completer if that write fails (Claimer.slot_freed).
        with shared.claim_lock:
            shared.completions.put(None)
        while completer.is_alive():
            if shared.force.is_set() or time.monotonic() >= deadline:
                shared.give_up_writes.set()
            completer.join(0.1)
        shared.halt.set()
        for thread in housekeeping:
            thread.join(5.0)
        shared.fence.close()
        shared.handler_calls.close()
        self.wakeup.close()
        stats = dict(shared.stats)
        log_event(
            log,
            logging.INFO,
            "worker.stopped",
            claimed=stats["claimed"],
            completed=stats["completed"],
            lost=stats["lost"],
            handed_back=stats["handed_back"],
        )

    def hand_back(self, deadline: float) -> None:
        """Give the jobs still executing back to the queue (the attempt refunded) and cancel
        their handlers; a job whose cancellation was requested ends cancelled instead."""
        shared, service = self.shared, self.shared.service
        with shared.lock:
            attempts = [a for a in shared.held.values() if a.phase is Phase.EXECUTING]
            for attempt in attempts:
                attempt.phase = Phase.HANDED_BACK
        if not attempts:
            return
        refs = [a.ref for a in attempts]
        try:
            requested = service.cancel_requested(refs)
        except Exception as error:
            log_event(log, logging.WARNING, "store.unavailable", op="cancel_check", error=error)
            requested = set()
        now = shared.clock.now()
        outcomes: list[tuple[AttemptRef, Outcome]] = [
            (
                a.ref,
                hand_back_outcome(
                    a.job, now, cancel_requested=a.cancel_requested or a.job.id in requested
                ),
            )
            for a in attempts
        ]
        retry = shared.retry("hand_back")
        jobs: list[Job | None]
        while True:
            try:
                jobs = service.complete_many(outcomes)
                break
            except Exception as error:
                delay = retry.failed(error)
                if not is_outage(error) or time.monotonic() + delay > deadline + 5:
                    jobs = [None] * len(attempts)
                    break
                time.sleep(delay)
        for attempt, job in zip(attempts, jobs, strict=True):
            attempt.ctx.cancel(HANDED_BACK)
            shared.stats["handed_back"] += 1
            log_event(
                log,
                logging.WARNING,
                "job.handed_back",
                job_id=attempt.job.id,
                type=attempt.job.type,
                org=attempt.job.org_id,
                attempt=attempt.job.attempts,
                duration_ms=round((time.monotonic() - attempt.started) * 1000, 1),
                outcome=job.status.value if job is not None else "left-running",
            )
        shared.forget(attempts)
