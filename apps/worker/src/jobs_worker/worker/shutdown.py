"""The shutdown: stop claiming, let the running jobs finish, hand the others back, write the rest.

Runs on the thread that called :meth:`Worker.run <jobs_worker.worker.Worker.run>` once the worker
stops (:meth:`Worker.stop <jobs_worker.worker.Worker.stop>`, a wedged handler). In order: hand
back at once the jobs claimed that no slot has started (:meth:`Shutdown.hand_back`, the choice
is the core's :func:`jobs_core.domain.hand_back_outcome`); wait up to ``shutdown_grace_s`` for
the slots to free up (``idle``; not at all when forced); hand back the jobs still executing;
close the slots' queue; close the completer's inbox and let it write what it has (the
hand-backs included: it is the one writer), giving up (``give_up_writes``) when forced or past
the grace; then stop the housekeeping threads (``halt``), the fence and the handlers' helper
threads.
"""

from __future__ import annotations

import logging
import threading
import time

from jobs_core import CancelReason, Wakeup
from jobs_core.domain import hand_back_outcome

from jobs_worker.logs import log_event
from jobs_worker.worker.state import Completion, Phase, Shared

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
            pass  # a claim begun before the stop is over, its jobs queued; no other begins
        self.hand_back(Phase.BUFFERED)
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
        self.hand_back(Phase.BUFFERED, Phase.EXECUTING)
        for _ in slots:
            shared.slots.put(None)
        # Outcomes already produced are written; through an outage, until the grace is spent.
        # Every slot that ended its attempt put the outcome in the inbox before it counted as
        # free, and every attempt still held is handed back: nothing comes after the close.
        shared.inbox.put(None)
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

    def hand_back(self, *phases: Phase) -> None:
        """Give the held attempts in ``phases`` back to the queue (the attempt refunded) and
        cancel their handlers; a job whose cancellation was requested ends cancelled instead.
        The outcomes go to the completer, which writes and logs them (``job.handed_back``)."""
        shared, service = self.shared, self.shared.service
        with shared.lock:
            attempts = [a for a in shared.held.values() if a.phase in phases]
            waiting = [a for a in attempts if a.phase is Phase.BUFFERED]
            for attempt in attempts:
                attempt.phase = Phase.HANDED_BACK
            shared.buffered -= len(waiting)  # the slots skip them
        if not attempts:
            return
        for attempt in waiting:
            shared.fence.stopped(attempt.job.id)  # no handler of theirs runs
        refs = [a.ref for a in attempts]
        try:
            requested = service.cancel_requested(refs)
        except Exception as error:
            log_event(log, logging.WARNING, "store.unavailable", op="cancel_check", error=error)
            requested = set()
        now = shared.clock.now()
        ended = time.monotonic()
        for attempt in attempts:
            attempt.ctx.cancel(CancelReason.SHUTDOWN, HANDED_BACK)
            outcome = hand_back_outcome(
                attempt.job,
                now,
                cancel_requested=attempt.cancel_requested or attempt.job.id in requested,
            )
            duration = ended - attempt.started
            shared.inbox.put(Completion(attempt, outcome, duration, handed_back=True))
