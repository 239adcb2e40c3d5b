"""The completer: the worker's one writer. It writes the outcomes and claims the next jobs, in one
round trip, on a thread of its own.

It waits on the inbox (``shared.inbox``) and, each time it wakes, takes every outcome waiting
(at most :data:`MAX_BATCH`) and, when slots are free or about to be (:class:`Demand`) and work
may wait (a notification, a full claim, a sweep, or ``poll_interval_s`` since the last look),
claims in the same call (``complete_and_claim``); otherwise it writes the outcomes alone
(``complete_many``). So batches form by themselves under load, a lone outcome is written at
once, and a busy queue costs one round trip per batch, not per job. Nothing else writes an
outcome or claims: the shutdown's hand-backs come through the inbox too.

Through an outage it retries (with backoff) until the batch is written, its lease is gone, or a
stopping worker gives up (``give_up_writes``); a batch refused for another reason is written one
by one, and the outcome the store refuses is replaced by a short failure
(:func:`jobs_core.runner.unrecordable_outcome`). It claims nothing while the lease fence stops
the claims or the worker stops. The inbox is closed with ``None``: what is left is written, then
the thread ends.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any

from jobs_core import Job
from jobs_core.errors import is_outage
from jobs_core.runner import short_error, unrecordable_outcome

from jobs_worker.logs import log_event, log_events
from jobs_worker.worker.claiming import Demand
from jobs_worker.worker.state import WAKE, Completion, Shared

log = logging.getLogger("jobs.worker")

MAX_BATCH = 1000
"""Outcomes written in one round trip at most."""

Start = Callable[[Job, float], None]
"""Hands a claimed job (its claim sent at the given ``time.monotonic()``) to the slots."""


_QUIET = ("done", "queued", "waiting")
"""The statuses an outcome leaves a job in that are logged at INFO (the others: WARNING)."""
_NOT_ENDED = {"queued": "job.requeued", "waiting": "job.waiting"}
"""The event logged for an outcome that leaves the job active (``waiting``: for its children,
decision 0043)."""


class Completer:
    """Writes outcomes and claims; :meth:`completed` logs and forgets the attempts written."""

    def __init__(self, shared: Shared, demand: Demand, start: Start) -> None:
        self.shared = shared
        self.config = shared.config
        self.service = shared.service
        self.demand = demand
        self._start = start
        self._inbox = shared.inbox
        self._give_up = shared.give_up_writes
        self._stats = shared.stats
        self._claims = shared.retry("claim")
        self._writes = shared.retry("complete")
        self._last_look = 0.0  # the last claim (time.monotonic()), made or failed
        self._claim_after = 0.0  # no claim before this (a failed claim's backoff)

    # -- the thread -----------------------------------------------------------------------------
    def serve(self) -> None:
        """The completer's thread: write and claim until the inbox is closed."""
        closed = False
        while not closed:
            batch: list[Completion] = []
            closed = self._take(batch, self._wait_s())
            self._round(batch, closing=closed)

    def _take(self, pending: list[Completion], timeout: float | None) -> bool:
        """Wait up to ``timeout`` (None: until something comes) for the inbox, then take what
        waits in it into ``pending``; True once the inbox is closed."""
        inbox = self._inbox
        try:
            item = inbox.get(timeout=timeout) if timeout != 0.0 else inbox.get_nowait()
        except queue.Empty:
            return False
        while True:
            if item is None:
                return True
            if item is not WAKE:
                assert isinstance(item, Completion)
                pending.append(item)
                if len(pending) >= MAX_BATCH:
                    return False
            try:
                item = inbox.get_nowait()
            except queue.Empty:
                return False

    def _wait_s(self) -> float | None:
        """How long to wait for the inbox before the next look for work (None: until woken)."""
        if not self.shared.fence.claiming_allowed:
            return self.config.poll_interval_s  # nothing wakes us when the fence lifts
        if self._wanted() <= 0:
            return None  # stopping, or slots full: a slot freeing up puts its outcome in the inbox
        now = time.monotonic()
        if self.shared.maybe_work.is_set():
            return max(0.0, self._claim_after - now)
        poll_at = self._last_look + self.config.poll_interval_s
        return max(0.0, self._claim_after - now, poll_at - now)

    def _wanted(self) -> int:
        """Jobs to claim now (0 while the worker stops or the fence stops the claims)."""
        shared = self.shared
        if shared.stop_claiming.is_set() or not shared.fence.claiming_allowed:
            return 0
        with shared.lock:
            inflight = shared.inflight()
        return self.demand.wanted(inflight)

    def _claim_due(self) -> bool:
        now = time.monotonic()
        if now < self._claim_after:
            return False
        polled = now - self._last_look >= self.config.poll_interval_s
        return polled or self.shared.maybe_work.is_set()

    # -- one round --------------------------------------------------------------------------
    def _round(self, batch: list[Completion], *, closing: bool) -> None:
        """Write ``batch`` and claim if a claim is due, in one round trip."""
        self.shared.looks += 1
        if not closing and self._claim_due():
            with self.shared.claim_lock:
                wanted = self._wanted()  # 0 once the worker stops: looked at under the lock
                if wanted > 0:
                    self._claim(batch, wanted)
                    return
        if batch:
            self._write(batch)

    def _claim(self, batch: list[Completion], wanted: int) -> None:
        """Write ``batch`` and claim up to ``wanted`` jobs in one round trip (``claim_lock``
        held); if that fails, the claim backs off and ``batch`` is written alone (which retries
        through an outage, and writes one by one what the store refuses)."""
        self.shared.maybe_work.clear()
        self._last_look = sent = time.monotonic()  # the claim's sign of life is no older
        try:
            finished, jobs = self.service.complete_and_claim(
                [(c.attempt.ref, c.outcome) for c in batch], wanted
            )
        except Exception as error:
            self.shared.maybe_work.set()  # look again after the backoff
            self._claim_after = time.monotonic() + self._claims.failed(error)
            if batch:
                self._write(batch)
            return
        self._claims.succeeded()
        self.shared.fence.link_ok()
        if len(jobs) == wanted:
            self.shared.maybe_work.set()  # a full claim: there may be more behind it
        for job in jobs:
            self._start(job, sent)
        if batch:
            self.completed(batch, finished)

    # -- outcomes alone ---------------------------------------------------------------------
    def _write(self, batch: list[Completion]) -> None:
        """Write ``batch`` in one round trip; retry through outages until written or given up."""
        retry = self._writes
        while True:
            try:
                jobs = self.service.complete_many([(c.attempt.ref, c.outcome) for c in batch])
            except Exception as error:
                if not is_outage(error):
                    retry.failed(error)
                    self._write_one_by_one(batch)
                    return
                delay = retry.failed(error)
                if self._give_up.is_set():
                    self._abandon(batch, error)
                    return
                self._give_up.wait(delay)
                continue
            retry.succeeded()
            self.shared.fence.link_ok()
            self.completed(batch, jobs)
            return

    def _write_one_by_one(self, batch: Sequence[Completion]) -> None:
        """A batch failed for a reason other than an outage (a report the store cannot encode,
        say): write each outcome alone, and fail the job whose outcome cannot be written."""
        for completion in batch:
            try:
                jobs = self.service.complete_many([(completion.attempt.ref, completion.outcome)])
            except Exception as error:
                if is_outage(error):
                    self._write([completion])
                    continue
                log_event(
                    log,
                    logging.ERROR,
                    "job.outcome_unwritable",
                    job_id=completion.attempt.job.id,
                    error=short_error(error),
                )
                replacement = unrecordable_outcome(error)
                fallback = dataclasses.replace(completion, outcome=replacement)
                try:
                    jobs = self.service.complete_many([(fallback.attempt.ref, replacement)])
                except Exception:
                    log.exception("cannot record the failure of job %s", fallback.attempt.job.id)
                    self.shared.forget([completion.attempt])
                    continue
                self.completed([fallback], jobs)
                continue
            self.completed([completion], jobs)

    # -- after the write --------------------------------------------------------------------
    def completed(self, batch: Sequence[Completion], jobs: Sequence[Job | None]) -> None:
        """Log the outcomes written (``jobs``: the rows, None where the lease was gone) and
        forget their attempts. One record per level for the batch (:func:`log_events`), one line
        per job."""
        stats = self._stats
        lines: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        for completion, job in zip(batch, jobs, strict=True):
            claimed = completion.attempt.job
            duration_ms = round(completion.duration_s * 1000, 1)
            if completion.handed_back:
                stats["handed_back"] += 1
                level, name = logging.WARNING, "job.handed_back"
                fields: dict[str, Any] = {
                    "job_id": claimed.id,
                    "type": claimed.type,
                    "org": claimed.org_id,
                    "attempt": claimed.attempts,
                    "duration_ms": duration_ms,
                    "outcome": job.status.value if job is not None else "left-running",
                }
            elif job is None:
                stats["lost"] += 1
                level, name = logging.WARNING, "job.lease_lost"
                fields = {
                    "job_id": claimed.id,
                    "type": claimed.type,
                    "org": claimed.org_id,
                    "attempt": claimed.attempts,
                    "duration_ms": duration_ms,
                    "outcome": type(completion.outcome).__name__.lower(),
                    "note": "not recorded: the job was swept and is no longer this attempt's",
                }
            else:
                stats["completed"] += 1
                status = job.status
                level = logging.INFO if status.value in _QUIET else logging.WARNING
                name = "job.finished" if status.is_finished else _NOT_ENDED[status.value]
                fields = {
                    "job_id": job.id,
                    "type": job.type,
                    "org": job.org_id,
                    "attempt": claimed.attempts,
                    "duration_ms": duration_ms,
                    "outcome": status.value,
                    "error": job.error,
                    "run_at": job.run_at.isoformat() if not status.is_finished else None,
                }
            lines.setdefault(level, []).append((name, fields))
        for level, events in lines.items():
            log_events(log, level, events)
        self.shared.forget([c.attempt for c in batch])

    def _abandon(self, batch: Sequence[Completion], error: BaseException) -> None:
        for completion in batch:
            log_event(
                log,
                logging.ERROR,
                "job.outcome_abandoned",
                job_id=completion.attempt.job.id,
                type=completion.attempt.job.type,
                error=short_error(error),
                note="the worker is stopping; the sweep will re-queue the job",
            )
        self.shared.forget([c.attempt for c in batch])
