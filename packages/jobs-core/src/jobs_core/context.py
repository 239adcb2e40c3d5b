"""What a handler receives: its job, its payload, progress reporting and cancellation."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn

from jobs_core.children import ChildAdmission, ChildEnqueuer, Children
from jobs_core.domain import CancelReason, Job, NewJob
from jobs_core.errors import DocumentTooLarge, JobCancelled, Snooze, WaitForChildren
from jobs_core.limits import CHECKPOINT_MAX_BYTES, DOCUMENT_MAX_BYTES, describe_size, oversize
from jobs_core.parents import NothingToWaitFor

ProgressSink = Callable[[Mapping[str, Any]], bool | None]
"""Writes a progress document for the running attempt: True when it was saved, False when the
attempt lost its lease, None when it was not saved although the attempt may still hold its lease
(the store is unreachable, or the worker's lease fence holds the write back)."""

CheckpointSink = Callable[[Mapping[str, Any], Mapping[str, Any]], bool | None]
"""Writes a progress document and the private checkpoint in one write; answers as
:data:`ProgressSink`."""

CheckpointLoader = Callable[[], Mapping[str, Any] | None]
"""Reads the job's private checkpoint (None if none was saved)."""

if TYPE_CHECKING:
    from jobs_core.registry import Registry
    from jobs_core.wait_service import AwaitedSummary

_UNLOADED: Any = object()


class JobContext:
    """The handler's view of its running job.

    ``report_progress`` is throttled (one write per ``progress_interval_s`` at most, unless
    ``force=True``) so a handler may call it per row without writing per row. ``checkpoint`` is
    the (public) progress the job had when this attempt was claimed. A resumable handler keeps
    its state private instead: ``save_progress(..., checkpoint=state)`` writes the public progress
    and the private checkpoint together, ``resume`` reads the last one saved (by an earlier
    attempt); the checkpoint is never shown by the API, the CLI or the event stream.
    Cancellation is cooperative: the worker sets it, the handler checks ``cancelled`` or calls
    ``raise_if_cancelled()`` between steps; ``cancel_reason`` says why. ``job`` is the job as
    this attempt claimed it (its id, org, attempts, ...); ``enqueue`` and ``enqueue_many`` make
    its children (:mod:`jobs_core.children`), ``wait_for_children()`` ends the attempt until
    they have ended (:mod:`jobs_core.parents`); ``awaited()`` reads the jobs it waited for.
    """

    def __init__(
        self,
        job: Job,
        *,
        progress_sink: ProgressSink,
        now: Callable[[], datetime],
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
        progress_interval_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        checkpoint_sink: CheckpointSink | None = None,
        checkpoint_loader: CheckpointLoader | None = None,
        registry: Registry | None = None,
        enqueuer: ChildEnqueuer | None = None,
        admit: ChildAdmission | None = None,
        awaited: Callable[[str, uuid.UUID], AwaitedSummary] | None = None,
    ) -> None:
        self.job = job
        self._awaited = awaited
        # Made on the first enqueue only (the completer builds a context per job).
        self._registry = registry
        self._enqueuer = enqueuer
        self._admit = admit
        self._kids: Children | None = None
        self.checkpoint: Mapping[str, Any] | None = job.progress
        self._logger = logger
        self._sink = progress_sink
        self._now = now
        self._interval = progress_interval_s
        self._monotonic = monotonic
        self._last_write: float | None = None
        # Made on the first wait only: an Event (a Condition and its lock) per job was a sixth
        # of a fast drain's time in the worker's completer, which builds every context.
        self._cancel: threading.Event | None = None
        self._cancel_reason: CancelReason | None = None
        self._cancel_message = ""
        self._lock = threading.Lock()
        self._checkpoint_sink = checkpoint_sink
        self._checkpoint_loader = checkpoint_loader
        self._resume: Mapping[str, Any] | None = _UNLOADED

    @property
    def logger(self) -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
        """The handler's logger (``jobs.handler.<type>`` unless the worker gave another)."""
        if self._logger is None:
            self._logger = logging.getLogger(f"jobs.handler.{self.job.type}")
        return self._logger

    @property
    def payload(self) -> Mapping[str, Any]:
        """The job's arguments."""
        return self.job.payload

    @property
    def attempt(self) -> int:
        """1 for the first attempt. A snooze or a worker's hand-back refunds the attempt, so the
        next run has the same number: tell runs apart by :attr:`run_id`."""
        return self.job.attempts

    def awaited(self) -> AwaitedSummary:
        """The jobs this job waited for before it ran (its ``depends_on``; a batch's callback:
        the batch's members; a parent: the children it waited for) and how each ended, read
        now: ``.jobs`` (id, type, status, in the order given) and ``.counts`` (jobs per
        status). Empty for a job that waited for none."""
        if self._awaited is None:
            raise RuntimeError("this context has no store to read the awaited jobs from")
        return self._awaited(self.job.org_id, self.job.id)

    @property
    def run_id(self) -> uuid.UUID | None:
        """This run's own id: the claim's lease, new at every claim (a retry, a snooze, a
        hand-back, a re-run after the sweep), so ``(job id, run_id)`` names one run where
        ``(job id, attempt)`` may name several. None for a context of a job never claimed."""
        return self.job.lease

    def enqueue(
        self,
        type_name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        dedup_key: str | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        immediately: bool = False,
    ) -> Job | None:
        """Enqueue a child of this job (same org, ``parent_id`` = this job's id).

        By default the child is written with this attempt's outcome, and only if the attempt
        ends ``done``: None is returned (the child has no id yet). With ``immediately=True``
        it is enqueued now and returned (or the job holding its dedup key), whatever the
        attempt comes to. An unregistered type raises :class:`~jobs_core.UnknownJobType`, a bad
        payload ``PayloadInvalid``, an org over its quotas
        :class:`~jobs_core.quotas.QuotaExceeded` (its ``retry_after_s`` suits a snooze), here,
        in the handler.
        """
        return self._made_children().enqueue(
            type_name,
            payload,
            dedup_key=dedup_key,
            run_at=run_at,
            priority=priority,
            immediately=immediately,
        )

    def enqueue_many(
        self,
        type_name: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        dedup_keys: Sequence[str | None] | None = None,
        priority: int = 0,
        immediately: bool = False,
    ) -> list[Job]:
        """:meth:`enqueue` of many children of one type; with ``immediately=True`` in one bulk
        insert (those whose dedup key is held are skipped) and returned, else held for the
        outcome ([] is returned)."""
        return self._made_children().enqueue_many(
            type_name,
            payloads,
            dedup_keys=dedup_keys,
            priority=priority,
            immediately=immediately,
        )

    @property
    def children(self) -> tuple[NewJob, ...]:
        """The children held for this attempt's outcome (not those enqueued immediately)."""
        return () if self._kids is None else self._kids.held

    @property
    def enqueued_children(self) -> tuple[uuid.UUID, ...]:
        """The ids of the children this attempt enqueued at once (``immediately=True``)."""
        return () if self._kids is None else self._kids.enqueued

    def wait_for_children(self, report: Mapping[str, Any] | None = None) -> NoReturn:
        """End this attempt waiting for the children it enqueued, without holding a slot
        (decision 0043): the job goes ``waiting`` (its children written with this outcome),
        and once they have all ended, whatever their ends, it runs again — its next run reads
        them and how they ended with :meth:`awaited` (so may a later wait's). The attempt is
        handed back, as a snooze's: it spends none of ``max_attempts``. ``report`` (optional)
        is shown while it waits.

        Raises :class:`~jobs_core.errors.WaitForChildren` (let it propagate: ``raise`` and
        ``return`` read alike), or :class:`~jobs_core.parents.NothingToWaitFor` when this
        attempt enqueued no child."""
        if not self.children and not self.enqueued_children:
            raise NothingToWaitFor(
                "wait_for_children(): this attempt enqueued no child to wait for"
            )
        raise WaitForChildren(report)

    def _made_children(self) -> Children:
        with self._lock:
            if self._kids is None:
                self._kids = Children(self.job, self._registry, self._enqueuer, self._admit)
            return self._kids

    def report_progress(
        self,
        done: int | float | None = None,
        total: int | float | None = None,
        *,
        force: bool = False,
        **extra: Any,
    ) -> bool:
        """Record progress (``done``/``total`` and any checkpoint keys); True only if it was
        written (False when throttled, when the store was unreachable, or when the lease is lost).

        Writes are skipped while the previous one is younger than the throttle interval, unless
        ``force`` (use it for a checkpoint that must be durable). Losing the lease (the job was
        swept and claimed by another worker) marks this attempt cancelled. A document over
        :data:`jobs_core.limits.DOCUMENT_MAX_BYTES` raises :class:`DocumentTooLarge`.
        """
        return self._write(done, total, force, extra, None)

    def save_progress(
        self,
        done: int | float | None = None,
        total: int | float | None = None,
        *,
        checkpoint: Mapping[str, Any],
        force: bool = True,
        **extra: Any,
    ) -> bool:
        """Record the public progress (as :meth:`report_progress`) and the private
        ``checkpoint`` in one atomic write; True only if both were written.

        Forced by default (a checkpoint is meant to be durable); with ``force=False`` it is
        throttled like :meth:`report_progress`. A checkpoint over
        :data:`jobs_core.limits.CHECKPOINT_MAX_BYTES` raises :class:`DocumentTooLarge`.
        """
        if self._checkpoint_sink is None:
            raise RuntimeError(
                "this context cannot store a private checkpoint (a child-process handler, or a"
                " context built without checkpoint_sink)"
            )
        state = dict(checkpoint)
        size = oversize(state, CHECKPOINT_MAX_BYTES)
        if size is not None:
            raise DocumentTooLarge(
                f"checkpoint over {describe_size(size - 1)} of JSON, more than the"
                f" {describe_size(CHECKPOINT_MAX_BYTES)} a job may hold: keep large state in"
                " your module's own tables"
            )
        if not self._write(done, total, force, extra, state):
            return False
        self._resume = state
        return True

    @property
    def resume(self) -> Mapping[str, Any] | None:
        """The last private checkpoint saved for this job (by an earlier attempt, or by this
        one), None if none; read from the store on first use."""
        if self._resume is _UNLOADED:
            loaded = self._checkpoint_loader() if self._checkpoint_loader is not None else None
            self._resume = None if loaded is None else dict(loaded)
        return self._resume

    def _write(
        self,
        done: int | float | None,
        total: int | float | None,
        force: bool,
        extra: Mapping[str, Any],
        checkpoint: Mapping[str, Any] | None,
    ) -> bool:
        with self._lock:
            tick = self._monotonic()
            if (
                not force
                and self._last_write is not None
                and tick - self._last_write < self._interval
            ):
                return False
            self._last_write = tick
        document: dict[str, Any] = dict(extra)
        if done is not None:
            document["done"] = done
        if total is not None:
            document["total"] = total
        document["updated_at"] = self._now().isoformat()
        size = oversize(document)
        if size is not None:
            raise DocumentTooLarge(
                f"progress document over {describe_size(size - 1)} of JSON, more than the"
                f" {describe_size(DOCUMENT_MAX_BYTES)} a job may hold: report counts and"
                " checkpoints, not data"
            )
        if checkpoint is None:
            saved = self._sink(document)
        else:
            assert self._checkpoint_sink is not None
            saved = self._checkpoint_sink(document, checkpoint)
        if saved is None:
            # Nothing was written (an outage): the throttle must not count it, so the next
            # report tries again at once.
            with self._lock:
                if self._last_write == tick:
                    self._last_write = None
            return False
        if not saved:
            self.cancel(CancelReason.LEASE_LOST)
            return False
        return True

    @property
    def cancelled(self) -> bool:
        """True once cancellation was requested (or the attempt lost its lease, or timed out)."""
        return self._cancel_reason is not None

    @property
    def cancel_reason(self) -> CancelReason | None:
        """Why the attempt was asked to stop (None while it was not): compare it with the
        members of :class:`~jobs_core.CancelReason`, e.g. to save a checkpoint on ``SHUTDOWN``
        but clean up on ``REQUESTED``."""
        return self._cancel_reason

    @property
    def cancel_message(self) -> str:
        """The human-readable text of the cancellation ("" while not cancelled)."""
        return self._cancel_message

    def raise_if_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if the job should stop now."""
        if self._cancel_reason is not None:
            raise JobCancelled(self._cancel_message or None)

    def snooze(self, delay_s: float, reason: str = "") -> None:
        """Stop this attempt and run again after ``delay_s`` seconds, without spending an
        attempt (raises :class:`Snooze`; the type's ``max_snoozes`` bounds how often)."""
        raise Snooze(delay_s, reason)

    @property
    def snoozes(self) -> int:
        """How often this job has snoozed so far."""
        return self.job.snoozes

    def wait_cancelled(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, waking early on cancellation; True if cancelled."""
        with self._lock:
            if self._cancel is None:
                self._cancel = threading.Event()
                if self._cancel_reason is not None:
                    self._cancel.set()
            event = self._cancel
        return event.wait(timeout)

    def cancel(
        self, reason: CancelReason = CancelReason.REQUESTED, message: str | None = None
    ) -> None:
        """Ask the handler to stop (called by the worker, the runner, or a test); the first
        reason given is kept. ``message`` defaults to the reason's own text."""
        with self._lock:
            if self._cancel_reason is not None:
                return
            self._cancel_message = message or CancelReason(reason).message
            self._cancel_reason = CancelReason(reason)
            event = self._cancel
        if event is not None:
            event.set()
