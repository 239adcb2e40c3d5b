"""What the parts of the worker share: the attempts it holds, its signals and its two queues.

Every part gets the one :class:`Shared` of its worker. The rules of the sharing:

- ``lock`` guards ``held``, ``executing``, ``buffered``, ``exit_code`` and the ``phase`` of every
  attempt; ``idle`` (a condition on ``lock``) is notified whenever a slot frees up or an attempt
  is forgotten, for a stopping worker that waits for them;
- ``claim_lock`` is held by the completer through a claim (from its last look at
  ``stop_claiming`` until the jobs claimed are queued for the slots): a stopping worker takes it
  once, after which no claim is under way and none begins;
- ``slots`` holds the claimed attempts no slot has started yet (``buffered`` of them): the
  claim takes jobs for the free slots and, while handlers are short, a few more
  (:class:`~jobs_worker.worker.claiming.Demand`), so a slot runs them back to back;
- ``inbox`` is the completer's, the worker's one writer: the outcomes to write, and
  :data:`WAKE` whenever a claim may find work (a notification, a stop, a sweep). A
  ``SimpleQueue``: its ``put`` is safe from a signal handler;
- the events are set from any thread (a signal handler included); ``maybe_work`` is cleared only
  by the completer.
"""

from __future__ import annotations

import dataclasses
import enum
import queue
import threading
import uuid

from jobs_core import AttemptRef, Job, JobContext, JobService, Outcome

from jobs_worker.fence import LeaseFence
from jobs_worker.handler_calls import AttemptCalls, HandlerCalls
from jobs_worker.worker.config import WorkerConfig
from jobs_worker.worker.outages import Retry


class Phase(enum.Enum):
    """Where a held attempt is: claimed and waiting for a slot, its handler runs, its outcome
    waits to be written, or a stopping worker gave it back to the queue (whatever its handler
    ends with is then moot)."""

    BUFFERED = "buffered"
    EXECUTING = "executing"
    COMPLETING = "completing"
    HANDED_BACK = "handed back"


@dataclasses.dataclass(slots=True, eq=False)
class Attempt:
    """A job this worker holds: from its claim until its outcome is written."""

    job: Job
    ctx: JobContext
    started: float  # when it was claimed, then when its handler started (time.monotonic())
    calls: AttemptCalls  # the store calls of its handler, released when it is fenced
    phase: Phase = Phase.BUFFERED
    cancel_requested: bool = False
    fenced: str | None = None  # the reason, when the lease fence cancelled the handler
    overrun: threading.Thread | None = None  # the handler's thread, still running past timeout
    ref: AttemptRef = dataclasses.field(
        init=False
    )  # built once: every write of the attempt uses it

    def __post_init__(self) -> None:
        self.ref = self.job.ref


@dataclasses.dataclass(slots=True)
class Completion:
    """An attempt's outcome, on its way to the store."""

    attempt: Attempt
    outcome: Outcome
    duration_s: float
    handed_back: bool = False  # the outcome of a stopping worker's hand-back


class _Wake:
    """The inbox's signal that a claim may find work now."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WAKE"


WAKE = _Wake()
"""Put in :attr:`Shared.inbox` to make the completer look for work at once."""

Item = Completion | _Wake | None
"""What the inbox holds: an outcome, a wake-up, or None (closed: write what is left, end)."""


class Shared:
    """The state of one worker that its parts share (see the module's docstring for the locks)."""

    def __init__(
        self,
        service: JobService,
        config: WorkerConfig,
        fence: LeaseFence,
        handler_calls: HandlerCalls,
    ) -> None:
        self.service = service
        self.clock = service.clock
        self.config = config
        self.fence = fence
        self.handler_calls = handler_calls
        self.lock = threading.Lock()
        self.held: dict[uuid.UUID, Attempt] = {}
        self.executing = 0  # slots busy: a handler runs (or overruns its timeout) on them
        self.buffered = 0  # attempts claimed that no slot has started yet
        self.idle = threading.Condition(self.lock)
        self.claim_lock = threading.Lock()  # held by the completer while it claims
        self.slots: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self.inbox: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self.looks = 0  # how often the completer looked for work (tests wait on it)
        self.maybe_work = threading.Event()  # the queue may hold jobs for us
        self.stop_claiming = threading.Event()
        self.force = threading.Event()  # a stop that hands the running jobs back at once
        self.halt = threading.Event()  # housekeeping threads end
        self.give_up_writes = threading.Event()  # the completer stops retrying through an outage
        self.stats = {"claimed": 0, "completed": 0, "lost": 0, "handed_back": 0}
        self.exit_code = 0

    def stop(self, graceful: bool = True) -> None:
        """Stop claiming (and, unless ``graceful``, hand the running jobs back at once). Only
        sets flags: safe from a signal handler."""
        if not graceful:
            self.force.set()
        self.stop_claiming.set()
        self.inbox.put(WAKE)

    def wake(self) -> None:
        """Work may be waiting: the completer claims at once (if a slot is free)."""
        self.maybe_work.set()
        self.inbox.put(WAKE)

    def inflight(self) -> int:
        """Attempts started or waiting for a slot (``lock`` held by the caller)."""
        return self.executing + self.buffered

    def retry(self, operation: str) -> Retry:
        """A backoff for the store calls named ``operation``, paced by the config."""
        return Retry(
            operation,
            self.config.backoff_initial_s,
            self.config.backoff_cap_s,
            self.service.observer,
        )

    def forget(self, attempts: list[Attempt]) -> None:
        """The attempts are no longer this worker's (written, abandoned or handed back)."""
        with self.lock:
            for attempt in attempts:
                self.held.pop(attempt.job.id, None)
            self.idle.notify_all()
