"""The claimer: claims at most as many jobs as there are free slots, and hands them to the slots.

It runs on the thread that called :meth:`Worker.run <jobs_worker.worker.Worker.run>` (the claim
loop), and on a slot's thread whose job just ended while work is known to wait
(:meth:`Claimer.slot_freed`): that slot claims for the free slots itself, its outcome and the
other done outcomes in the same round trip, which spares a busy queue a round trip and two thread
hand-offs per job. One claimer at a time (``claim_lock``). The loop looks when a notification says
work arrived (``maybe_work``), when a slot frees up after a claim that filled every slot
(``kick``), or every ``poll_interval_s`` as a fallback; it claims nothing while the lease fence
stops the claims.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence

from jobs_core import Done, Job

from jobs_worker.worker.completer import MAX_BATCH, Completer
from jobs_worker.worker.state import Attempt, Completion, Phase, Shared


class Claimer:
    """Claims for the free slots; ``start`` hands a claimed job to a slot."""

    def __init__(
        self, shared: Shared, start: Callable[[Job, float], None], completer: Completer
    ) -> None:
        self.shared = shared
        self.config = shared.config
        self.service = shared.service
        self.fence = shared.fence
        self._start = start
        self._completer = completer
        self._lock = shared.lock
        self._claim_lock = shared.claim_lock
        self._completions = shared.completions
        self._kick = shared.kick
        self._maybe_work = shared.maybe_work
        self._stop_claiming = shared.stop_claiming
        # The calls of slots that claim (one at a time, under the claim lock).
        self._slot_claims = shared.retry("complete_and_claim")
        self._last_claim = time.monotonic()

    def loop(self) -> None:
        """Claim until the worker stops claiming."""
        shared, cfg = self.shared, self.config
        retry = shared.retry("claim")
        while not self._stop_claiming.is_set():
            # Cleared before looking at the state, so a change made while we look re-wakes us.
            self._kick.clear()
            delay = 0.0
            with self._claim_lock:
                with self._lock:
                    free = cfg.concurrency - shared.executing
                since = time.monotonic() - self._last_claim
                due = (
                    free > 0
                    and self.fence.claiming_allowed
                    and (self._maybe_work.is_set() or since >= cfg.poll_interval_s)
                )
                if due:
                    try:
                        self._claim(free)
                    except Exception as error:
                        delay = retry.failed(error)
                    else:
                        retry.succeeded()
            if due:
                self._stop_claiming.wait(delay)
                continue
            timeout = cfg.poll_interval_s - since if free > 0 else cfg.poll_interval_s
            self._kick.wait(max(0.0, timeout))

    def _claim(self, free: int, completions: Sequence[Completion] = ()) -> None:
        """Claim up to ``free`` jobs and hand them to the slots (``claim_lock`` held); with
        ``completions``, write their outcomes in the same round trip."""
        self._maybe_work.clear()
        self._last_claim = time.monotonic()
        finished: list[Job | None] = []
        sent = time.monotonic()  # the claim's sign of life is no older than this
        try:
            if completions:
                finished, jobs = self.service.complete_and_claim(
                    [(c.attempt.ref, c.outcome) for c in completions], free
                )
            else:
                jobs = self.service.claim(free)
        except Exception:
            self._maybe_work.set()
            raise
        if len(jobs) == free:
            self._maybe_work.set()  # a full batch: there may be more behind it
        for job in jobs:
            self._start(job, sent)
        if completions:
            self._completer.completed(completions, finished)

    def slot_freed(self, attempt: Attempt, completion: Completion) -> bool:
        """The handler of ``attempt`` ended with ``completion``: count its slot as free, queue
        its outcome for the completer or, while work is known to wait, claim for the free slots
        from this (the slot's) thread, the outcome in the same round trip. True when the attempt
        had been handed back meanwhile (its outcome is then moot, and dropped)."""
        # The slot holds the claim lock from here: a stopping worker closes the completer's
        # queue only under that lock, so an outcome this slot keeps is written, or queued for
        # the completer, before the queue closes.
        shared = self.shared
        claiming = self._maybe_work.is_set() and self._claim_lock.acquire(blocking=False)
        if claiming and self._stop_claiming.is_set():
            self._claim_lock.release()
            claiming = False
        claimed = False
        try:
            own = claiming and isinstance(completion.outcome, Done)
            with self._lock:
                handed_back = attempt.phase is Phase.HANDED_BACK
                if not handed_back:
                    attempt.phase = Phase.COMPLETING
                    if not own:
                        # Queued before the slot counts as free, so a stopping worker that
                        # sees no job executing knows every outcome is in that queue.
                        self._completions.put(completion)
                shared.executing -= 1
                shared.idle.notify_all()
            if claiming:
                claimed = self._claim_from_slot([completion] if own and not handed_back else [])
        finally:
            if claiming:
                self._claim_lock.release()
        if handed_back or not claimed:
            self._kick.set()
        return handed_back

    def _claim_from_slot(self, own: list[Completion]) -> bool:
        """Claim for the free slots from a slot that just freed up (``claim_lock`` held),
        writing ``own`` (its job's outcome, if done) and the other done outcomes waiting for the
        completer in the same round trip. False when it did not claim (no free slot, or the call
        failed): the outcomes are then the completer's to write, and the claim loop looks, with
        its backoff and its logs."""
        with self._lock:
            free = self.config.concurrency - self.shared.executing
        batch = own + self._waiting_done(MAX_BATCH - len(own))
        if free <= 0 or not self._maybe_work.is_set() or not self.fence.claiming_allowed:
            for completion in batch:
                self._completions.put(completion)
            return False
        try:
            self._claim(free, batch)
        except Exception as error:
            # Logged, not retried here: the completer retries the outcomes through an outage,
            # or one by one if one of them is the cause (it is alive: its queue is closed only
            # under the claim lock this thread holds), and the claim loop claims with backoff.
            self._slot_claims.failed(error)
            for completion in batch:
                self._completions.put(completion)
            return False
        self._slot_claims.succeeded()
        return True

    def _waiting_done(self, limit: int) -> list[Completion]:
        """Up to ``limit`` done outcomes taken from the completer's queue (the others are put
        back: a failure's ``on_fail`` hook must not run under the claim lock)."""
        taken: list[Completion] = []
        others: list[Completion | None] = []
        while len(taken) < limit:
            try:
                completion = self._completions.get_nowait()
            except queue.Empty:
                break
            if completion is None:  # pragma: no cover - closed only under the claim lock
                others.append(completion)
                break
            (taken if isinstance(completion.outcome, Done) else others).append(completion)
        for completion in others:
            self._completions.put(completion)
        return taken
