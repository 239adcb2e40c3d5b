"""The slots: ``concurrency`` threads, each running one attempt at a time.

:meth:`Slots.start` makes a claimed job an attempt this worker holds (its context: progress and
private checkpoint saved under the lease, the checkpoint read back on demand; its fence watch)
and queues it; :meth:`Slots.serve` is a slot's thread: it takes the next attempt (claimed jobs
wait in the queue, so a slot runs short jobs back to back, never waiting for a claim between
them), runs it through :func:`jobs_core.runner.run_attempt` (an async handler on an event loop
of its own), and puts the outcome in the completer's inbox. An attempt handed back while it
waited is skipped. A handler past its timeout keeps its slot until its code stops, at most
``timeout_grace_s``; then the worker is wedged and exits (docs/worker.md, "Timeouts"). The queue
is closed with one ``None`` per slot.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from jobs_core import CancelReason, Job, JobContext
from jobs_core.children import ChildAdmission
from jobs_core.errors import is_outage
from jobs_core.runner import fenced_outcome, run_attempt, short_error

from jobs_worker.handler_calls import AttemptCalls
from jobs_worker.logs import log_event
from jobs_worker.worker.claiming import Demand
from jobs_worker.worker.config import EXIT_WEDGED
from jobs_worker.worker.state import WAKE, Attempt, Completion, Phase, Shared

log = logging.getLogger("jobs.worker")


class Slots:
    """The slots of one worker."""

    def __init__(self, shared: Shared, demand: Demand) -> None:
        self.shared = shared
        self.demand = demand
        self.service = shared.service
        self.clock = shared.clock
        self.fence = shared.fence
        self._lock = shared.lock
        self._queue = shared.slots
        self.admit_children: ChildAdmission | None = None
        """The quotas children are admitted under (the deployment's, set by the composition;
        None: none, as in tests over a store of their own)."""

    def start(self, job: Job, proven_at: float) -> None:
        """Hold ``job`` (claimed: its lease proven at ``proven_at``) and queue it for a slot."""
        shared = self.shared
        calls = shared.handler_calls.for_attempt()
        attempt = Attempt(job, self._context(job, calls), time.monotonic(), calls)
        with self._lock:
            shared.held[job.id] = attempt
            shared.buffered += 1
            shared.stats["claimed"] += 1

        def fence(reason: str) -> None:
            attempt.fenced = reason
            attempt.ctx.cancel(CancelReason.LEASE_LOST, reason)
            attempt.calls.fence()  # a progress write it waits for must not hold it
            self.withdraw(attempt)  # waiting for a slot: handed back now (the fence's outcome)

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

    def withdraw(self, attempt: Attempt) -> bool:
        """End now an attempt whose context was cancelled (a cancellation request, a lost
        lease, the fence) while it waited for a slot: its outcome is the core's for a context
        cancelled before its handler starts (the handler is never called), written by the
        completer at once instead of when a slot frees up. False if a slot already took it."""
        shared = self.shared
        with self._lock:
            if attempt.phase is not Phase.BUFFERED:
                return False
            attempt.phase = Phase.COMPLETING
            shared.buffered -= 1
        self.fence.stopped(attempt.job.id)
        now = self.clock.now
        outcome = run_attempt(self.service.registry, attempt.ctx, now)
        outcome = fenced_outcome(outcome, attempt.fenced, attempt.cancel_requested, now)
        shared.inbox.put(Completion(attempt, outcome, time.monotonic() - attempt.started))
        return True

    def _context(self, job: Job, calls: AttemptCalls) -> JobContext:
        # Bound with partial (C), not closures: the completer builds a context per claimed job,
        # and two closures with their annotations were a twentieth of its CPU in a drain.
        service = self.service
        save = functools.partial(self._save_progress, job, calls)
        return JobContext(
            job,
            progress_sink=save,
            now=self.clock.now,
            checkpoint_sink=save,
            checkpoint_loader=functools.partial(service.checkpoint_of, job.id),
            registry=service.registry,
            enqueuer=service.enqueue_children,
            admit=self.admit_children,
            awaited=service.awaited,
        )

    def _save_progress(
        self,
        job: Job,
        calls: AttemptCalls,
        document: Mapping[str, Any],
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool | None:
        """The attempt's progress (and checkpoint) written under its lease. None: not saved,
        the lease not known lost (the handler's write did not happen, so a ``force=True``
        checkpoint must not be reported durable)."""
        if not self.fence.claiming_allowed:
            # The link is known silent: a write would only block the handler, which must
            # be free to see its cancellation (docs/worker.md, "The lease fence").
            return None
        service, ref = self.service, job.ref
        try:
            # Waited for only while the lease holds: a write blocked on a silent link must
            # not keep a fenced handler from stopping (jobs_worker.handler_calls).
            copy = dict(document)
            ended, saved = calls.run(lambda: service.save_progress(ref, copy, checkpoint))
            return bool(saved) if ended else None
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
            return None

    def serve(self) -> None:
        """A slot's thread: run attempts until the queue is closed."""
        registry, now = self.service.registry, self.clock.now
        shared, lock, observe = self.shared, self._lock, self.demand.observe
        inbox = shared.inbox
        tracer = self.service.tracer
        tracing = tracer.enabled  # off: this one test per attempt is all tracing costs
        while (attempt := self._queue.get()) is not None:
            with lock:
                if attempt.phase is not Phase.BUFFERED:
                    continue  # handed back while it waited: its outcome is already on its way
                attempt.phase = Phase.EXECUTING
                shared.buffered -= 1
                shared.executing += 1
            started = attempt.started = time.monotonic()

            def overrun(thread: threading.Thread, attempt: Attempt = attempt) -> None:
                attempt.overrun = thread

            if tracing:  # a span around the attempt (decision 0039)
                with tracer.processing(attempt.job) as span:
                    outcome = span.ended(
                        run_attempt(registry, attempt.ctx, now, on_overrun=overrun)
                    )
            else:
                outcome = run_attempt(registry, attempt.ctx, now, on_overrun=overrun)
            ended = time.monotonic()
            self.fence.stopped(attempt.job.id)
            outcome = fenced_outcome(outcome, attempt.fenced, attempt.cancel_requested, now)
            completion = Completion(attempt, outcome, ended - started)
            observe(ended - started)
            if attempt.overrun is not None:
                if not self._linger(attempt, completion, attempt.overrun):
                    return  # the worker is wedged and exits; this thread stays with the code
                continue
            with lock:
                handed_back = attempt.phase is Phase.HANDED_BACK
                if not handed_back:
                    attempt.phase = Phase.COMPLETING
                    # Queued before the slot counts as free, so a stopping worker that sees no
                    # job executing knows every outcome is in the inbox.
                    inbox.put(completion)
                shared.executing -= 1
                shared.idle.notify_all()
            if handed_back:
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
                shared.inbox.put(completion)
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
        shared.inbox.put(WAKE)  # the slot is free: the completer may claim for it
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
