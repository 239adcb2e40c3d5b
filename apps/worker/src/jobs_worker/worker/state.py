"""What the parts of the worker share: the attempts it holds, its signals and its two queues.

Every part gets the one :class:`Shared` of its worker. The rules of the sharing:

- ``lock`` guards ``held``, ``executing``, ``exit_code`` and the ``phase`` of every attempt;
  ``idle`` (a condition on ``lock``) is notified whenever a slot frees up or an attempt is
  forgotten, for a stopping worker that waits for them;
- ``claim_lock``: one claimer at a time (the claim loop, or a slot that just freed up), and the
  completer's queue is closed only under it;
- the events are set from any thread (a signal handler included) and never cleared but by their
  one reader: ``kick`` and ``maybe_work`` by the claimer.
"""

from __future__ import annotations

import enum
import queue
import threading
import uuid
from dataclasses import dataclass

from jobs_core import AttemptRef, Job, JobContext, JobService, Outcome

from jobs_worker.fence import LeaseFence
from jobs_worker.handler_calls import AttemptCalls, HandlerCalls
from jobs_worker.worker.config import WorkerConfig
from jobs_worker.worker.outages import Retry


class Phase(enum.Enum):
    """Where a held attempt is: its handler runs, its outcome waits to be written, or a stopping
    worker gave it back to the queue (whatever its handler ends with is then moot)."""

    EXECUTING = "executing"
    COMPLETING = "completing"
    HANDED_BACK = "handed back"


@dataclass(slots=True, eq=False)
class Attempt:
    """A job this worker holds: from its claim until its outcome is written."""

    job: Job
    ctx: JobContext
    started: float
    calls: AttemptCalls  # the store calls of its handler, released when it is fenced
    phase: Phase = Phase.EXECUTING
    cancel_requested: bool = False
    fenced: str | None = None  # the reason, when the lease fence cancelled the handler
    overrun: threading.Thread | None = None  # the handler's thread, still running past timeout

    @property
    def ref(self) -> AttemptRef:
        return self.job.ref


@dataclass(slots=True)
class Completion:
    """An attempt's outcome, on its way to the store."""

    attempt: Attempt
    outcome: Outcome
    duration_s: float


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
        self.idle = threading.Condition(self.lock)
        self.claim_lock = threading.Lock()
        self.slots: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self.completions: queue.SimpleQueue[Completion | None] = queue.SimpleQueue()
        self.kick = threading.Event()  # something changed: the claim loop looks again
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
        self.kick.set()

    def retry(self, operation: str) -> Retry:
        """A backoff for the store calls named ``operation``, paced by the config."""
        return Retry(operation, self.config.backoff_initial_s, self.config.backoff_cap_s)

    def forget(self, attempts: list[Attempt]) -> None:
        """The attempts are no longer this worker's (written, abandoned or handed back)."""
        with self.lock:
            for attempt in attempts:
                self.held.pop(attempt.job.id, None)
            self.idle.notify_all()
