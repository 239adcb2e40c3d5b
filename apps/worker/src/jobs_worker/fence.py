"""The lease fence: a worker that cannot prove its leases stops its handlers before anyone else
may run their jobs (docs/worker.md, "The lease fence").

A job's lease is proven at the instant the worker *sent* the statement that last wrote its sign
of life and saw it succeed: its claim, or a heartbeat that found the job still held. The sweep of
any worker may take a job whose last sign of life is older than the sweep threshold ``T``, so
the lease is safe until ``proven_at + T`` and no later. The fence therefore:

- at ``proven_at + T - margin`` cancels the handler (reason: lease unproven), and the worker
  stops claiming until a store call succeeds again;
- at ``proven_at + T - margin / 2``, if the handler still has not returned (it ignores its
  cancellation, or is stuck in native code), calls ``on_wedged``: the worker process exits at
  once, which stops every handler for sure, before the sweep may hand the job to another worker.

The fence runs on its own thread and never touches the store: a store call blocked on a silent
network cannot delay it. Times are ``time.monotonic()`` (no wall-clock jumps).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from jobs_worker.logs import log_event

log = logging.getLogger("jobs.worker")

LEASE_UNPROVEN = "lease unproven"
"""The start of the cancellation reason of a fenced handler."""


@dataclass(slots=True)
class _Lease:
    proven_at: float
    cancel: Callable[[str], None]
    fenced_at: float | None = None


class LeaseFence:
    """Tracks when each running handler's lease was last proven, and fences the overdue ones.

    ``window_s`` is ``T - margin``; ``stop_within_s`` (``margin / 2``) is how long a fenced
    handler gets to return before ``on_wedged(reason)`` is called. ``clock`` is injectable for
    tests.
    """

    def __init__(
        self,
        window_s: float,
        stop_within_s: float,
        on_wedged: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s <= 0 or stop_within_s <= 0:
            raise ValueError("the fence needs a positive window and stop time")
        self.window_s = window_s
        self.stop_within_s = stop_within_s
        self._on_wedged = on_wedged
        self._clock = clock
        self._leases: dict[uuid.UUID, _Lease] = {}
        self._changed = threading.Condition()
        self._link_lost = False
        self._closed = False
        self.fenced_total = 0
        self._thread: threading.Thread | None = None
        self._wakes_at: float | None = None  # when the thread looks next (None: on a change)
        self._dirty = False  # a lease came due earlier than that: look again before waiting

    # -- what the worker tells the fence ----------------------------------------------------
    def track(self, job_id: uuid.UUID, proven_at: float, cancel: Callable[[str], None]) -> None:
        """A handler starts for ``job_id``, whose claim was sent at ``proven_at``."""
        with self._changed:
            self._leases[job_id] = _Lease(proven_at, cancel)
            due = proven_at + self.window_s
            # Woken only when this deadline comes before the one it waits for: once per job
            # would cost a thread switch per job at a few thousand jobs a second.
            if self._wakes_at is None or due < self._wakes_at:
                self._dirty = True
                self._changed.notify_all()

    def proved(self, job_ids: Iterable[uuid.UUID], sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` succeeded and found ``job_ids`` still held: their
        leases are proven again, and the link works (claiming may resume)."""
        with self._changed:
            for job_id in job_ids:
                lease = self._leases.get(job_id)
                if lease is not None and lease.fenced_at is None:
                    lease.proven_at = max(lease.proven_at, sent_at)
            if self._link_lost:
                self._link_lost = False
                log_event(log, logging.INFO, "worker.fence_lifted", note="the store answers again")

    def link_ok(self) -> None:
        """A store call went through: claiming may resume (no lease is proven by it)."""
        self.proved((), 0.0)

    def stopped(self, job_id: uuid.UUID) -> None:
        """The handler of ``job_id`` returned: nothing of it runs any more (no wake-up: a
        deadline gone never makes the next one earlier)."""
        with self._changed:
            self._leases.pop(job_id, None)

    @property
    def claiming_allowed(self) -> bool:
        """False from a fencing until a store call succeeds again."""
        return not self._link_lost

    def fenced(self, job_id: uuid.UUID) -> bool:
        """True if the handler of ``job_id`` was fenced."""
        with self._changed:
            lease = self._leases.get(job_id)
            return lease is not None and lease.fenced_at is not None

    # -- the thread -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the fence's thread (daemon)."""
        self._thread = threading.Thread(target=self._run, name="jobs-fence", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the fence's thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(5.0)

    def check(self) -> float | None:
        """Fence the overdue leases and report wedged handlers now; the next deadline."""
        now = self._clock()
        to_fence: list[tuple[uuid.UUID, _Lease]] = []
        wedged: list[uuid.UUID] = []
        upcoming: list[float] = []
        with self._changed:
            for job_id, lease in self._leases.items():
                if lease.fenced_at is None:
                    due = lease.proven_at + self.window_s
                    if now >= due:
                        lease.fenced_at = now
                        to_fence.append((job_id, lease))
                        upcoming.append(now + self.stop_within_s)
                    else:
                        upcoming.append(due)
                else:
                    due = lease.fenced_at + self.stop_within_s
                    if now >= due:
                        wedged.append(job_id)
                    else:
                        upcoming.append(due)
            if to_fence:
                self._link_lost = True
                self.fenced_total += len(to_fence)
        for job_id, lease in to_fence:
            silent = now - lease.proven_at
            reason = (
                f"{LEASE_UNPROVEN}: no heartbeat reached the store for {silent:.1f} s; the job is"
                " handed back before the sweep may give it to another worker"
            )
            log_event(
                log,
                logging.WARNING,
                "job.fenced",
                job_id=job_id,
                silent_s=round(silent, 2),
                note="the handler is cancelled and claiming stops until the store answers",
            )
            lease.cancel(reason)
        if wedged:
            self._on_wedged(
                f"{len(wedged)} handler(s) did not stop within {self.stop_within_s:.1f} s of"
                f" being fenced (job {wedged[0]}); the lease cannot be proven and the sweep may"
                " soon give the job to another worker"
            )
            return None
        return min(upcoming) if upcoming else None

    def _run(self) -> None:
        while True:
            upcoming = self.check()
            with self._changed:
                if self._closed:
                    return
                if self._dirty:  # tracked while the thread was checking: check again first
                    self._dirty = False
                    continue
                timeout = None if upcoming is None else max(0.0, upcoming - self._clock())
                if timeout is not None:
                    timeout = min(timeout, 1.0)
                self._wakes_at = None if timeout is None else self._clock() + timeout
                # Woken by a lease due earlier than that; else at the next deadline (a proof
                # only moves deadlines later: the thread finds them when it wakes).
                self._changed.wait(timeout)
