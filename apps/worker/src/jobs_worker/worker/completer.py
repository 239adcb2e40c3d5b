"""The completer: writes the outcomes of the attempts, batched, on a thread of its own.

It takes every outcome waiting in ``shared.completions`` and writes them in one
``complete_many`` round trip, so batches form by themselves under load and a lone completion is
written at once, never held back for a batch. Through an outage it retries (with backoff) until
the batch is written, its lease is gone, or a stopping worker gives up (``give_up_writes``); a
batch refused for another reason is written one by one, and the outcome the store refuses is
replaced by a short failure (:func:`jobs_core.runner.unrecordable_outcome`). The queue is closed
with ``None``.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
from collections.abc import Sequence

from jobs_core import Job
from jobs_core.errors import is_outage
from jobs_core.runner import short_error, unrecordable_outcome

from jobs_worker.logs import log_event
from jobs_worker.worker.state import Completion, Shared

log = logging.getLogger("jobs.worker")

MAX_BATCH = 1000
"""Outcomes written in one round trip at most."""


class Completer:
    """Writes outcomes; :meth:`completed` logs and forgets the attempts written."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.service = shared.service
        self._completions = shared.completions
        self._give_up = shared.give_up_writes
        self._stats = shared.stats

    def serve(self) -> None:
        """The completer's thread: write batches until the queue is closed."""
        stopping = False
        while not stopping:
            first = self._completions.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    more = self._completions.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.append(more)
            self._write(batch)

    def _write(self, batch: list[Completion]) -> None:
        """Write ``batch`` in one round trip; retry through outages until written or given up."""
        retry = self.shared.retry("complete")
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

    def _write_one_by_one(self, batch: list[Completion]) -> None:
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

    def completed(self, batch: Sequence[Completion], jobs: Sequence[Job | None]) -> None:
        """Log the outcomes written (``jobs``: the rows, None where the lease was gone) and
        forget their attempts."""
        stats = self._stats
        for completion, job in zip(batch, jobs, strict=True):
            claimed = completion.attempt.job
            if job is None:
                stats["lost"] += 1
                log_event(
                    log,
                    logging.WARNING,
                    "job.lease_lost",
                    job_id=claimed.id,
                    type=claimed.type,
                    org=claimed.org_id,
                    attempt=claimed.attempts,
                    duration_ms=round(completion.duration_s * 1000, 1),
                    outcome=type(completion.outcome).__name__.lower(),
                    note="not recorded: the job was swept and is no longer this attempt's",
                )
                continue
            stats["completed"] += 1
            log_event(
                log,
                logging.INFO if job.status.value in ("done", "queued") else logging.WARNING,
                "job.finished" if job.status.is_finished else "job.requeued",
                job_id=job.id,
                type=job.type,
                org=job.org_id,
                attempt=claimed.attempts,
                duration_ms=round(completion.duration_s * 1000, 1),
                outcome=job.status.value,
                error=job.error,
                run_at=job.run_at.isoformat() if not job.status.is_finished else None,
            )
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
