"""The worker: N slots in one process, fed by one claim loop, with its housekeeping threads.

Threads (decision 0001 and 0006):

- the **claim loop** (the thread that calls :meth:`Worker.run`) claims at most as many jobs as
  there are free slots, when a notification says work arrived, when a slot frees up after a claim
  that filled every slot, or every ``poll_interval_s`` as a fallback;
- **slots** (``concurrency`` threads) run one job each through :func:`jobs_core.runner.execute`;
  an async handler runs on the slot thread's own event loop;
- the **completer** writes outcomes: it takes every outcome waiting and writes them in one
  ``complete_many`` round trip, so batches form by themselves under load and a lone completion
  is written at once, never held back for a batch;
- the **listener** turns :class:`~jobs_core.ports.Wakeup` signals (LISTEN/NOTIFY) into claims;
- the **monitor** checks running jobs for cancellation requests (every ``cancel_check_s``) and
  heartbeats them (every ``heartbeat_s``); a job whose lease is gone gets its context cancelled;
- the **sweeper** re-queues or fails zombies at start and every ``sweep_interval_s``;
- the **hook pass** runs the due ``on_fail`` / ``on_cancel`` hooks of jobs this worker did not
  end itself (cancelled while queued, or whose worker died) every ``poll_interval_s``
  (decision 0025);
- the **fence** (:mod:`jobs_worker.fence`) cancels the handlers whose lease could not be proven
  in time and stops the claims until the store answers (docs/worker.md, "The lease fence").

Every store call is guarded: an outage is logged, retried with exponential backoff (capped) and
never kills the worker; an outcome that cannot be written through an outage is retried until it
is written or its lease is gone, one the store refuses (``StoreRefused``) is replaced by a short
failure. A handler past its timeout keeps its slot until it stops (docs/worker.md, "Timeouts").
See :meth:`Worker.stop` for shutdown.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import sqlalchemy.exc
from jobs_core import (
    AttemptRef,
    Cancelled,
    CancelReason,
    Done,
    Failed,
    Job,
    JobContext,
    JobService,
    Outcome,
    Requeue,
    StoreRefused,
    StoreUnavailable,
    UnknownJobType,
    Wakeup,
)
from jobs_core.runner import execute, short_error

from jobs_worker.fence import LeaseFence
from jobs_worker.handler_calls import AttemptCalls, HandlerCalls
from jobs_worker.logs import log_event
from jobs_worker.presence import presence_of

log = logging.getLogger("jobs.worker")

OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    StoreUnavailable,
    ConnectionError,
    TimeoutError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.DisconnectionError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
"""Errors that mean "the database is not reachable right now": retry later, the data is fine.
The PostgreSQL adapter translates its driver's errors into ``StoreUnavailable``; the others are
listed in case one slips through untranslated."""

_MAX_BATCH = 1000
"""Outcomes written in one round trip at most."""

_HANDED_BACK = "the worker shut down before the job finished"

_HOOK_BATCH = 100
"""Due end hooks taken per pass at most."""

_LISTEN_WAIT_S = 0.5

EXIT_WEDGED = 4
"""The exit code of a worker one of whose handlers overran its timeout by more than
``timeout_grace_s`` (docs/worker.md, "Timeouts"): its other jobs were handed back, its
supervisor starts a new process (the only way to stop that code)."""

EXIT_FENCED = 5
"""The exit code of a worker that fenced itself and whose handlers would not stop in time
(docs/worker.md, "The lease fence"): its supervisor starts a new one."""


def is_outage(error: BaseException) -> bool:
    """True when ``error``, or what explicitly caused it (``raise … from``), says the store is
    unreachable. The implicit ``__context__`` is not followed: a bug raised while an outage
    was being handled is still a bug, and retrying it forever would hide it. A
    :class:`StoreRefused` is never one, whatever driver error caused it: the store refused the
    data, and it would refuse it again."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, StoreRefused):
            return False
        if isinstance(current, OUTAGE_ERRORS):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a :class:`Worker` paces itself (all durations in seconds of real time).

    ``backoff_initial_s`` / ``backoff_cap_s`` bound the retries of a store call during an outage.
    ``timeout_grace_s``: how long a handler still running after its timeout may keep its slot
    before the worker exits with :data:`EXIT_WEDGED`.
    ``lease_margin_s`` (default: a fifth of ``sweep_threshold_s``): a handler whose lease was
    not proven for ``sweep_threshold_s - lease_margin_s`` is cancelled, and the process exits
    if it has not stopped ``lease_margin_s / 2`` later (:mod:`jobs_worker.fence`).
    """

    concurrency: int = 1
    heartbeat_s: float = 30.0
    sweep_interval_s: float = 60.0
    sweep_threshold_s: float = 600.0
    poll_interval_s: float = 1.0
    cancel_check_s: float = 1.0
    shutdown_grace_s: float = 30.0
    backoff_initial_s: float = 0.1
    backoff_cap_s: float = 5.0
    lease_margin_s: float | None = None
    timeout_grace_s: float = 30.0

    @property
    def margin_s(self) -> float:
        """The lease margin in use (``lease_margin_s``, or a fifth of the threshold)."""
        if self.lease_margin_s is not None:
            return self.lease_margin_s
        return self.sweep_threshold_s / 5

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        for name in (
            "heartbeat_s",
            "sweep_interval_s",
            "sweep_threshold_s",
            "poll_interval_s",
            "cancel_check_s",
            "backoff_initial_s",
            "backoff_cap_s",
            "timeout_grace_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.shutdown_grace_s < 0:
            raise ValueError("shutdown_grace_s must be >= 0")
        if not 0 < self.margin_s < self.sweep_threshold_s - self.heartbeat_s:
            raise ValueError(
                f"lease_margin_s ({self.margin_s:g}) must be > 0 and leave room for a heartbeat"
                f" within the sweep threshold: heartbeat_s + lease_margin_s <"
                f" sweep_threshold_s ({self.heartbeat_s:g} + {self.margin_s:g} <"
                f" {self.sweep_threshold_s:g}); lower the margin or the heartbeat"
            )


class _Phase(enum.Enum):
    EXECUTING = "executing"
    COMPLETING = "completing"
    HANDED_BACK = "handed back"


@dataclass(slots=True, eq=False)
class _Attempt:
    """A job this worker holds: from its claim until its outcome is written."""

    job: Job
    ctx: JobContext
    started: float
    calls: AttemptCalls  # the store calls of its handler, released when it is fenced
    phase: _Phase = _Phase.EXECUTING
    cancel_requested: bool = False
    fenced: str | None = None  # the reason, when the lease fence cancelled the handler
    overrun: threading.Thread | None = None  # the handler's thread, still running past timeout

    @property
    def ref(self) -> AttemptRef:
        return self.job.ref


@dataclass(slots=True)
class _Completion:
    attempt: _Attempt
    outcome: Outcome
    duration_s: float


class _Retry:
    """Exponential backoff of one loop's store calls, logging the outage and the recovery."""

    def __init__(self, operation: str, initial_s: float, cap_s: float) -> None:
        self.operation = operation
        self._initial = initial_s
        self._cap = cap_s
        self.failures = 0

    def failed(self, error: BaseException) -> float:
        """Log ``error`` and return how long to wait before the next try."""
        delay = float(min(self._cap, self._initial * 2**self.failures))
        self.failures += 1
        outage = is_outage(error)
        log_event(
            log,
            logging.WARNING if outage else logging.ERROR,
            "store.unavailable" if outage else "worker.error",
            op=self.operation,
            error=short_error(error),
            failures=self.failures,
            retry_in_s=round(delay, 3),
            exc_info=not outage,
        )
        return delay

    def succeeded(self) -> None:
        """Reset the backoff after a call went through."""
        if self.failures:
            log_event(log, logging.INFO, "store.recovered", op=self.operation, after=self.failures)
            self.failures = 0


class Worker:
    """Runs the registered job types of ``service`` on ``config.concurrency`` slots.

    ``run()`` blocks until the worker has stopped and returns the process exit code (0, or
    :data:`EXIT_WEDGED` when a handler overran its timeout beyond the grace);
    ``stop()`` may be called from any thread (a signal handler included).
    """

    def __init__(
        self, service: JobService, wakeup: Wakeup, config: WorkerConfig | None = None
    ) -> None:
        self.service = service
        self.store = service.store
        self.clock = service.clock
        self.wakeup = wakeup
        self.config = config or WorkerConfig()
        self._lock = threading.Lock()
        self._held: dict[uuid.UUID, _Attempt] = {}
        self._executing = 0
        self._slots: queue.SimpleQueue[_Attempt | None] = queue.SimpleQueue()
        self._completions: queue.SimpleQueue[_Completion | None] = queue.SimpleQueue()
        self._kick = threading.Event()  # something changed: the claim loop looks again
        self._maybe_work = threading.Event()  # the queue may hold jobs for us
        self._stop_claiming = threading.Event()
        self._force = threading.Event()
        self._halt = threading.Event()  # housekeeping threads end
        self._give_up_writes = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._claim_lock = threading.Lock()  # one claimer at a time: the loop or a freed slot
        cfg = self.config
        # The calls of slots that claim (one at a time, under the claim lock).
        self._slot_claims = _Retry("complete_and_claim", cfg.backoff_initial_s, cfg.backoff_cap_s)
        self._last_claim = time.monotonic()
        self._started = False
        self.stats = {"claimed": 0, "completed": 0, "lost": 0, "handed_back": 0}
        self.fence = LeaseFence(
            cfg.sweep_threshold_s - cfg.margin_s, cfg.margin_s / 2, self._fence_wedged
        )
        self._handler_calls = HandlerCalls(cfg.concurrency)
        self.exit_code = 0
        self.hard_exit: Any = os._exit
        """Called with :data:`EXIT_FENCED` when fenced handlers will not stop (tests replace
        it); the default ends the process at once, every thread with it."""

    # -- public ---------------------------------------------------------------------------------
    def run(self) -> int:
        """Claim and run jobs until :meth:`stop`; return the exit code."""
        if self._started:
            raise RuntimeError("a Worker runs once; build a new one")
        self._started = True
        cfg = self.config
        log_event(
            log,
            logging.INFO,
            "worker.started",
            concurrency=cfg.concurrency,
            types=",".join(self.service.registry.names()) or "-",
            heartbeat_s=cfg.heartbeat_s,
            sweep_interval_s=cfg.sweep_interval_s,
            sweep_threshold_s=cfg.sweep_threshold_s,
        )
        slots = [
            self._thread(self._slot_main, f"jobs-slot-{index}") for index in range(cfg.concurrency)
        ]
        completer = self._thread(self._completer_main, "jobs-completer")
        housekeeping = [
            self._thread(self._listener_main, "jobs-listener"),
            self._thread(self._monitor_main, "jobs-monitor"),
            self._thread(self._sweeper_main, "jobs-sweeper"),
            self._thread(self._hooks_main, "jobs-hooks"),
        ]
        self.fence.start()
        presence = presence_of(
            self.store, self.clock, self.service.registry.names(), cfg.concurrency, self._halt
        )
        if presence is not None:  # workers are known (jobs workers, "why is this job waiting?")
            housekeeping.append(self._thread(presence.run, "jobs-presence"))
        self._maybe_work.set()
        try:
            self._claim_loop()
        finally:
            self._shutdown(slots, completer, housekeeping)
        return self.exit_code

    def stop(self, graceful: bool = True) -> None:
        """Stop claiming; running jobs finish (``graceful``) or are cancelled and handed back.

        A graceful stop becomes a forced one when ``shutdown_grace_s`` elapses. Safe to call
        from a signal handler: it only sets flags.
        """
        if not graceful:
            self._force.set()
        self._stop_claiming.set()
        self._kick.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop_claiming.is_set()

    def running_jobs(self) -> list[Job]:
        """The jobs this worker holds now (running, or with an outcome not yet written)."""
        with self._lock:
            return [attempt.job for attempt in self._held.values()]

    # -- claim loop -----------------------------------------------------------------------------
    def _claim_loop(self) -> None:
        cfg = self.config
        retry = _Retry("claim", cfg.backoff_initial_s, cfg.backoff_cap_s)
        while not self._stop_claiming.is_set():
            # Cleared before looking at the state, so a change made while we look re-wakes us.
            self._kick.clear()
            delay = 0.0
            with self._claim_lock:
                with self._lock:
                    free = cfg.concurrency - self._executing
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

    def _claim(self, free: int, completions: Sequence[_Completion] = ()) -> None:
        """Claim up to ``free`` jobs and hand them to the slots (``_claim_lock`` held); with
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
            self._completed(completions, finished)

    def _claim_from_slot(self, own: list[_Completion]) -> bool:
        """Claim for the free slots from a slot that just freed up while work is known to wait
        (``_claim_lock`` held), writing ``own`` (its job's outcome, if done) and the other done
        outcomes waiting for the completer in the same round trip.

        This spares a busy queue a round trip and two thread hand-offs per job (slot → claim
        loop → slot, slot → completer): the job claimed is usually run by this very thread,
        next. False when it did not claim (no free slot, or the call failed): the outcomes are
        then the completer's to write, and the claim loop looks, with its backoff and its logs.
        """
        with self._lock:
            free = self.config.concurrency - self._executing
        batch = own + self._waiting_done(_MAX_BATCH - len(own))
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

    def _waiting_done(self, limit: int) -> list[_Completion]:
        """Up to ``limit`` done outcomes taken from the completer's queue (the others are put
        back: a failure's ``on_fail`` hook must not run under the claim lock)."""
        taken: list[_Completion] = []
        others: list[_Completion | None] = []
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

    def _start(self, job: Job, proven_at: float) -> None:
        calls = self._handler_calls.for_attempt()
        attempt = _Attempt(job, self._context(job, calls), time.monotonic(), calls)
        with self._lock:
            self._held[job.id] = attempt
            self._executing += 1
            self.stats["claimed"] += 1

        def fence(reason: str) -> None:
            attempt.fenced = reason
            attempt.ctx.cancel(CancelReason.LEASE_LOST, reason)
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
        self._slots.put(attempt)

    def _context(self, job: Job, calls: AttemptCalls) -> JobContext:
        ref = job.ref

        def save_progress(
            document: Mapping[str, Any], checkpoint: Mapping[str, Any] | None = None
        ) -> bool | None:
            # None: not saved, the lease not known lost (the handler's write did not happen,
            # so a ``force=True`` checkpoint must not be reported durable).
            if not self.fence.claiming_allowed:
                # The link is known silent: a write would only block the handler, which must
                # be free to see its cancellation (docs/worker.md, "The lease fence").
                return None
            try:
                # Waited for only while the lease holds: a write blocked on a silent link must
                # not keep a fenced handler from stopping (jobs_worker.handler_calls).
                copy, now = dict(document), self.clock.now()
                ended, saved = calls.run(
                    lambda: self.store.save_progress(ref, copy, now, checkpoint)
                )
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

        return JobContext(
            job,
            progress_sink=save_progress,
            now=self.clock.now,
            checkpoint_sink=save_progress,
            checkpoint_loader=lambda: self.store.checkpoint_of(job.id),
        )

    # -- slots ----------------------------------------------------------------------------------
    def _slot_main(self) -> None:
        while (attempt := self._slots.get()) is not None:
            outcome = self._execute(attempt)
            self.fence.stopped(attempt.job.id)
            if attempt.fenced and isinstance(outcome, Cancelled) and not attempt.cancel_requested:
                # Stopped by the fence, not by anyone's request: back to the queue, the attempt
                # refunded (written if the link returns before the sweep takes the job).
                outcome = Requeue(
                    run_at=self.clock.now(), error=attempt.fenced[:500], refund_attempt=True
                )
            if attempt.overrun is not None:
                completion = _Completion(attempt, outcome, time.monotonic() - attempt.started)
                if not self._linger(attempt, completion, attempt.overrun):
                    return  # the worker is wedged and exits; this thread stays with the code
                continue
            completion = _Completion(attempt, outcome, time.monotonic() - attempt.started)
            # While work is known to wait, the slot claims for the free slots itself, its
            # outcome in the same round trip. It holds the claim lock from here: a stopping
            # worker closes the completer's queue only under that lock, so an outcome this
            # slot keeps is written, or queued for the completer, before the queue closes.
            claiming = self._maybe_work.is_set() and self._claim_lock.acquire(blocking=False)
            if claiming and self._stop_claiming.is_set():
                self._claim_lock.release()
                claiming = False
            claimed = False
            try:
                own = claiming and isinstance(outcome, Done)
                with self._lock:
                    handed_back = attempt.phase is _Phase.HANDED_BACK
                    if not handed_back:
                        attempt.phase = _Phase.COMPLETING
                        if not own:
                            # Queued before the slot counts as free, so a stopping worker that
                            # sees no job executing knows every outcome is in that queue.
                            self._completions.put(completion)
                    self._executing -= 1
                    self._idle.notify_all()
                if claiming:
                    claimed = self._claim_from_slot([completion] if own and not handed_back else [])
            finally:
                if claiming:
                    self._claim_lock.release()
            if handed_back or not claimed:
                self._kick.set()
            if handed_back:
                # Its attempt was already given back to the queue; this result is moot.
                log_event(
                    log,
                    logging.INFO,
                    "job.stopped_after_hand_back",
                    job_id=attempt.job.id,
                    outcome=type(outcome).__name__.lower(),
                )

    def _execute(self, attempt: _Attempt) -> Outcome:
        job = attempt.job
        try:
            job_type = self.service.registry.get(job.type)

            def overrun(thread: threading.Thread) -> None:
                attempt.overrun = thread

            return execute(job_type, attempt.ctx, self.clock.now, on_overrun=overrun)
        except UnknownJobType as error:
            return Failed(error=str(error), report={"exception_type": "UnknownJobType"})
        except BaseException as error:  # SystemExit or the like from a handler: the job fails
            return Failed(
                error=short_error(error), report={"exception_type": type(error).__qualname__}
            )

    def _linger(self, attempt: _Attempt, completion: _Completion, thread: threading.Thread) -> bool:
        """The handler overran its timeout: its failure is written now, but its slot stays
        counted as busy until its code really stops (no hidden oversubscription). Past
        ``timeout_grace_s`` the worker is wedged (:meth:`_wedged`); False then."""
        with self._lock:
            if attempt.phase is not _Phase.HANDED_BACK:
                attempt.phase = _Phase.COMPLETING
                self._completions.put(completion)
        grace = self.config.timeout_grace_s
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
            self._executing -= 1
            self._idle.notify_all()
        self._kick.set()
        return True

    def _wedged(self, reason: str) -> None:
        """A handler will not stop: stop claiming, hand the other jobs back, exit with
        :data:`EXIT_WEDGED` so the supervisor starts a fresh process."""
        with self._lock:
            if self.exit_code:
                return
            self.exit_code = EXIT_WEDGED
        log_event(log, logging.CRITICAL, "worker.wedged", code=EXIT_WEDGED, reason=reason)
        self.stop(graceful=False)

    # -- completions ----------------------------------------------------------------------------
    def _completer_main(self) -> None:
        stopping = False
        while not stopping:
            first = self._completions.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _MAX_BATCH:
                try:
                    more = self._completions.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.append(more)
            self._write(batch)

    def _write(self, batch: list[_Completion]) -> None:
        """Write ``batch`` in one round trip; retry through outages until written or given up."""
        cfg = self.config
        retry = _Retry("complete", cfg.backoff_initial_s, cfg.backoff_cap_s)
        while True:
            try:
                jobs = self.service.complete_many([(c.attempt.ref, c.outcome) for c in batch])
            except Exception as error:
                if not is_outage(error):
                    retry.failed(error)
                    self._write_one_by_one(batch)
                    return
                delay = retry.failed(error)
                if self._give_up_writes.is_set():
                    self._abandon(batch, error)
                    return
                self._give_up_writes.wait(delay)
                continue
            retry.succeeded()
            self.fence.link_ok()
            self._completed(batch, jobs)
            return

    def _write_one_by_one(self, batch: list[_Completion]) -> None:
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
                replacement = Failed(
                    error=f"the job's outcome could not be recorded: {short_error(error)}"[:500],
                    report={"exception_type": type(error).__qualname__},
                )
                fallback = dataclasses.replace(completion, outcome=replacement)
                try:
                    jobs = self.service.complete_many([(fallback.attempt.ref, replacement)])
                except Exception:
                    log.exception("cannot record the failure of job %s", fallback.attempt.job.id)
                    self._forget([completion])
                    continue
                self._completed([fallback], jobs)
                continue
            self._completed([completion], jobs)

    def _completed(self, batch: Sequence[_Completion], jobs: Sequence[Job | None]) -> None:
        for completion, job in zip(batch, jobs, strict=True):
            claimed = completion.attempt.job
            if job is None:
                self.stats["lost"] += 1
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
            self.stats["completed"] += 1
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
        self._forget(batch)

    def _abandon(self, batch: Sequence[_Completion], error: BaseException) -> None:
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
        self._forget(batch)

    def _forget(self, batch: Iterable[_Completion]) -> None:
        with self._lock:
            for completion in batch:
                self._held.pop(completion.attempt.job.id, None)
            self._idle.notify_all()

    # -- wake-ups -------------------------------------------------------------------------------
    def _listener_main(self) -> None:
        cfg = self.config
        retry = _Retry("listen", cfg.backoff_initial_s, cfg.backoff_cap_s)
        # Short waits, so a stopping worker's listener notices ``_halt`` soon; the claim loop
        # keeps its own poll as the fallback.
        timeout = min(cfg.poll_interval_s, _LISTEN_WAIT_S)
        while not self._halt.is_set():
            began = time.monotonic()
            try:
                woken = self.wakeup.wait(timeout)
            except Exception as error:
                self._halt.wait(retry.failed(error))
                continue
            retry.succeeded()
            if woken:
                self._maybe_work.set()
                self._kick.set()
            elif time.monotonic() - began < timeout / 2:
                # A wake-up that returns at once (closed, reconnecting) must not spin a core.
                self._halt.wait(timeout / 2)

    # -- heartbeats and cancellation ------------------------------------------------------------
    def _monitor_main(self) -> None:
        cfg = self.config
        beats = _Retry("heartbeat", cfg.backoff_initial_s, cfg.backoff_cap_s)
        checks = _Retry("cancel_check", cfg.backoff_initial_s, cfg.backoff_cap_s)
        next_beat = time.monotonic() + cfg.heartbeat_s
        next_check = time.monotonic() + cfg.cancel_check_s
        while True:
            wait = max(0.0, min(next_beat, next_check) - time.monotonic())
            if self._halt.wait(wait):
                return
            now = time.monotonic()
            if now >= next_check:
                try:
                    self.check_cancellations()
                except Exception as error:
                    next_check = now + max(cfg.cancel_check_s, checks.failed(error))
                else:
                    checks.succeeded()
                    next_check = now + cfg.cancel_check_s
            if now >= next_beat:
                try:
                    self.heartbeat()
                except Exception as error:
                    # Retry soon: a missed heartbeat brings the job closer to the sweep.
                    next_beat = now + min(cfg.heartbeat_s, beats.failed(error))
                else:
                    beats.succeeded()
                    next_beat = now + cfg.heartbeat_s

    def check_cancellations(self) -> set[uuid.UUID]:
        """Cancel the context of every running job whose cancellation was requested; their ids.

        The monitor calls this every ``cancel_check_s``; tests may call it directly.
        """
        with self._lock:
            watched = [
                a
                for a in self._held.values()
                if a.phase is _Phase.EXECUTING and not a.cancel_requested
            ]
        if not watched:
            return set()
        requested = self.store.cancel_requested([a.ref for a in watched])
        for attempt in watched:
            if attempt.job.id in requested:
                attempt.cancel_requested = True
                attempt.ctx.cancel(CancelReason.REQUESTED)
                log_event(
                    log,
                    logging.INFO,
                    "job.cancel_requested",
                    job_id=attempt.job.id,
                    type=attempt.job.type,
                    org=attempt.job.org_id,
                    attempt=attempt.job.attempts,
                )
        return requested

    def heartbeat(self) -> set[uuid.UUID]:
        """Refresh ``progress.updated_at`` of every held job; cancel those whose lease is gone.

        Returns the ids still held. The monitor calls this every ``heartbeat_s``.
        """
        with self._lock:
            held = list(self._held.values())
        if not held:
            return set()
        sent = time.monotonic()  # the beat written is no older than this
        alive = self.store.heartbeat([a.ref for a in held], self.clock.now())
        self.fence.proved(alive, sent)
        for attempt in held:
            # Only a job still executing can have lost its lease unseen: a completing one is
            # being written (the write itself is fenced), a handed-back one was given away.
            if attempt.job.id not in alive and attempt.phase is _Phase.EXECUTING:
                attempt.ctx.cancel(CancelReason.LEASE_LOST)
                log_event(
                    log,
                    logging.WARNING,
                    "job.lease_lost",
                    job_id=attempt.job.id,
                    type=attempt.job.type,
                    org=attempt.job.org_id,
                    attempt=attempt.job.attempts,
                    note="the handler's context is cancelled",
                )
        return alive

    # -- end hooks (decision 0025) --------------------------------------------------------------
    def _hooks_main(self) -> None:
        """Run the due end hooks (on_fail, on_cancel) of jobs this worker did not end itself:
        cancelled while queued, or whose worker died before running them. Every
        ``poll_interval_s``, at once again while a pass found a full batch."""
        cfg = self.config
        retry = _Retry("end_hooks", cfg.backoff_initial_s, cfg.backoff_cap_s)
        delay = 0.0
        while not self._halt.wait(delay):
            try:
                full = self.service.run_end_hooks(_HOOK_BATCH) == _HOOK_BATCH
            except Exception as error:
                delay = max(cfg.poll_interval_s, retry.failed(error))
            else:
                retry.succeeded()
                delay = 0.0 if full else cfg.poll_interval_s

    # -- sweep ----------------------------------------------------------------------------------
    def _sweeper_main(self) -> None:
        cfg = self.config
        retry = _Retry("sweep", cfg.backoff_initial_s, cfg.backoff_cap_s)
        while True:
            try:
                self.sweep()
            except Exception as error:
                delay = min(cfg.sweep_interval_s, retry.failed(error))
            else:
                retry.succeeded()
                delay = cfg.sweep_interval_s
            if self._halt.wait(delay):
                return

    def sweep(self) -> int:
        """Re-queue or fail the zombies once (docs/contract.md §5); how many jobs it changed.

        This worker's own jobs are heartbeaten first: after an outage longer than the threshold
        their last heartbeat is old, yet they are alive (a finished one only waits for its
        outcome to be written) and must not be swept by their own worker.
        """
        self.heartbeat()
        report = self.service.sweep(self.config.sweep_threshold_s)
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
            self._maybe_work.set()
            self._kick.set()
        return len(changed)

    # -- shutdown -------------------------------------------------------------------------------
    def _shutdown(
        self,
        slots: list[threading.Thread],
        completer: threading.Thread,
        housekeeping: list[threading.Thread],
    ) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.shutdown_grace_s
        with self._claim_lock:
            pass  # a claim a slot started before the stop is over; no other can begin
        with self._lock:
            running = self._executing
        log_event(
            log,
            logging.INFO,
            "worker.stopping",
            running=running,
            grace_s=cfg.shutdown_grace_s,
            forced=self._force.is_set(),
        )
        with self._lock:
            while self._executing and not self._force.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._idle.wait(min(remaining, 0.1))
        self._hand_back(deadline)
        for _ in slots:
            self._slots.put(None)
        # Outcomes already produced are written; through an outage, until the grace is spent.
        # Closed under the claim lock: a slot writing outcomes with its claim holds it, and
        # hands them to the completer if that write fails (see _slot_main).
        with self._claim_lock:
            self._completions.put(None)
        while completer.is_alive():
            if self._force.is_set() or time.monotonic() >= deadline:
                self._give_up_writes.set()
            completer.join(0.1)
        self._halt.set()
        for thread in housekeeping:
            thread.join(5.0)
        self.fence.close()
        self._handler_calls.close()
        self.wakeup.close()
        stats = dict(self.stats)
        log_event(
            log,
            logging.INFO,
            "worker.stopped",
            claimed=stats["claimed"],
            completed=stats["completed"],
            lost=stats["lost"],
            handed_back=stats["handed_back"],
        )

    def _hand_back(self, deadline: float) -> None:
        """Give the jobs still executing back to the queue (the attempt refunded) and cancel
        their handlers; a job whose cancellation was requested ends cancelled instead."""
        with self._lock:
            attempts = [a for a in self._held.values() if a.phase is _Phase.EXECUTING]
            for attempt in attempts:
                attempt.phase = _Phase.HANDED_BACK
        if not attempts:
            return
        refs = [a.ref for a in attempts]
        try:
            requested = self.store.cancel_requested(refs)
        except Exception as error:
            log_event(log, logging.WARNING, "store.unavailable", op="cancel_check", error=error)
            requested = set()
        now = self.clock.now()
        outcomes: list[tuple[AttemptRef, Outcome]] = []
        for attempt in attempts:
            if attempt.cancel_requested or attempt.job.id in requested:
                reason = "cancellation requested; the worker shut down before the handler stopped"
                outcomes.append((attempt.ref, Cancelled(report={"reason": reason})))
            else:
                outcomes.append((attempt.ref, Requeue(run_at=now, refund_attempt=True)))
        retry = _Retry("hand_back", self.config.backoff_initial_s, self.config.backoff_cap_s)
        while True:
            try:
                jobs = self.service.complete_many(outcomes)
                break
            except Exception as error:
                delay = retry.failed(error)
                if not is_outage(error) or time.monotonic() + delay > deadline + 5:
                    jobs = [None] * len(attempts)
                    break
                time.sleep(delay)
        for attempt, job in zip(attempts, jobs, strict=True):
            attempt.ctx.cancel(CancelReason.SHUTDOWN, _HANDED_BACK)
            self.stats["handed_back"] += 1
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
        with self._lock:
            for attempt in attempts:
                self._held.pop(attempt.job.id, None)

    def _fence_wedged(self, reason: str) -> None:
        """Fenced handlers would not stop: end the process before another worker may run their
        jobs (the sweep re-queues them; the supervisor starts a new worker)."""
        log_event(log, logging.CRITICAL, "worker.fenced_exit", code=EXIT_FENCED, reason=reason)
        for handler in logging.getLogger().handlers:
            handler.flush()
        self.hard_exit(EXIT_FENCED)

    @staticmethod
    def _thread(target: Any, name: str) -> threading.Thread:
        # Daemon threads: a handler stuck in native code after its cancellation must not keep
        # the process alive once the worker has handed its job back.
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread
