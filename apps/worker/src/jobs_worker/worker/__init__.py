"""The worker: N slots in one process, fed and written for by one completer, with its
housekeeping threads.

:class:`Worker` only wires its parts, each in a module of its own (docs/worker.md, "The parts";
decisions 0001, 0006, 0021 and 0025):

- :mod:`.state`: what the parts share (the attempts held, the locks, the events, the queues);
- :mod:`.completer`: the one writer, a thread that writes the outcomes, batched, and claims the
  next jobs in the same round trip;
- :mod:`.claiming`: how many jobs a claim asks for (the free slots, and a prefetch sized by the
  handlers' recent durations);
- :mod:`.slots`: ``concurrency`` threads that run one attempt each, back to back;
- :mod:`.listener`: a thread that turns notifications into claims;
- :mod:`.monitor`: a thread that heartbeats the held jobs and checks for cancellation requests;
- :mod:`.sweeper`: a thread that re-queues or fails zombies;
- :mod:`.hooks`: a thread that runs the due end hooks (``on_fail`` / ``on_cancel``) of jobs this
  worker did not end itself (cancelled while queued, or whose worker died), every
  ``poll_interval_s`` (decision 0025);
- :mod:`.shutdown`: the stop, the hand-back and the end of the threads;
- :mod:`.outages`: the backoff and logs of the store calls retried through an outage;
- the lease fence (:mod:`jobs_worker.fence`, a thread of its own) cancels the handlers whose
  lease could not be proven in time and stops the claims until the store answers.

The rules are jobs-core's: what a handler's end becomes (:mod:`jobs_core.runner`), what an outage
is (:func:`jobs_core.errors.is_outage`), the hand-back (:func:`jobs_core.domain.hand_back_outcome`),
the sweep and every store call (:class:`jobs_core.JobService`).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any

from jobs_core import Job, JobService, Wakeup
from jobs_core.errors import OUTAGE_ERRORS, is_outage

from jobs_worker.fence import LeaseFence
from jobs_worker.handler_calls import HandlerCalls
from jobs_worker.logs import log_event
from jobs_worker.presence import Presence
from jobs_worker.worker.claiming import Demand
from jobs_worker.worker.completer import Completer
from jobs_worker.worker.config import EXIT_FENCED, EXIT_WEDGED, WorkerConfig
from jobs_worker.worker.hooks import HookPass
from jobs_worker.worker.listener import listen
from jobs_worker.worker.monitor import Monitor
from jobs_worker.worker.shutdown import Shutdown
from jobs_worker.worker.slots import Slots
from jobs_worker.worker.state import Shared
from jobs_worker.worker.sweeper import Sweeper

__all__ = [
    "EXIT_FENCED",
    "EXIT_WEDGED",
    "OUTAGE_ERRORS",
    "Worker",
    "WorkerConfig",
    "is_outage",
]

log = logging.getLogger("jobs.worker")


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
        self.clock = service.clock
        self.wakeup = wakeup
        self.config = cfg = config or WorkerConfig()
        self.fence = LeaseFence(
            cfg.sweep_threshold_s - cfg.margin_s, cfg.margin_s / 2, self._fence_wedged
        )
        self.shared = Shared(service, cfg, self.fence, HandlerCalls(cfg.concurrency))
        self.stats = self.shared.stats
        self.demand = Demand(cfg.concurrency, cfg.prefetch, cfg.prefetch_window_s)
        self.slots = Slots(self.shared, self.demand)
        self.completer = Completer(self.shared, self.demand, self.slots.start)
        self.monitor = Monitor(self.shared, self.slots.withdraw)
        self.sweeper = Sweeper(self.shared, self.monitor)
        self.hooks = HookPass(self.shared)
        self._shutdown = Shutdown(self.shared, wakeup)
        self._started = False
        self.hard_exit: Callable[[int], Any] = os._exit
        """Called with :data:`EXIT_FENCED` when fenced handlers will not stop (tests replace
        it); the default ends the process at once, every thread with it."""

    # -- public ---------------------------------------------------------------------------------
    def run(self) -> int:
        """Claim and run jobs until :meth:`stop`; return the exit code."""
        if self._started:
            raise RuntimeError("a Worker runs once; build a new one")
        self._started = True
        cfg, shared = self.config, self.shared
        log_event(
            log,
            logging.INFO,
            "worker.started",
            concurrency=cfg.concurrency,
            prefetch=cfg.prefetch,
            claim="fair" if self.service.fair_claim else "fifo",
            limited=",".join(sorted(self.service.registry.flow_limits())) or "-",
            types=",".join(self.service.registry.names()) or "-",
            heartbeat_s=cfg.heartbeat_s,
            sweep_interval_s=cfg.sweep_interval_s,
            sweep_threshold_s=cfg.sweep_threshold_s,
        )
        serve = self.slots.serve
        slots = [_thread(serve, f"jobs-slot-{index}") for index in range(cfg.concurrency)]
        completer = _thread(self.completer.serve, "jobs-completer")
        housekeeping = [
            _thread(functools.partial(listen, shared, self.wakeup), "jobs-listener"),
            _thread(self.monitor.serve, "jobs-monitor"),
            _thread(self.sweeper.serve, "jobs-sweeper"),
            _thread(self.hooks.serve, "jobs-hooks"),
        ]
        self.fence.start()
        # workers are known (jobs workers, "why is this job waiting?"): every store keeps them
        presence = Presence(
            self.service.store,
            self.clock,
            self.service.registry.names(),
            cfg.concurrency,
            shared.halt,
        )
        housekeeping.append(_thread(presence.run, "jobs-presence"))
        shared.wake()  # the first claim, at once
        try:
            # Short waits: a signal handler (stop()) runs on this thread between them.
            while not shared.stop_claiming.wait(0.5):
                pass
        finally:
            self._shutdown.run(slots, completer, housekeeping)
        return self.exit_code

    def stop(self, graceful: bool = True) -> None:
        """Stop claiming; running jobs finish (``graceful``) or are cancelled and handed back.

        A graceful stop becomes a forced one when ``shutdown_grace_s`` elapses. Safe to call
        from a signal handler: it only sets flags.
        """
        self.shared.stop(graceful)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self.shared.stop_claiming.is_set()

    @property
    def exit_code(self) -> int:
        """0, or :data:`EXIT_WEDGED` once a handler overran its timeout beyond the grace."""
        return self.shared.exit_code

    def running_jobs(self) -> list[Job]:
        """The jobs this worker holds now (running, or with an outcome not yet written)."""
        with self.shared.lock:
            return [attempt.job for attempt in self.shared.held.values()]

    def check_cancellations(self) -> set[uuid.UUID]:
        """Cancel the context of every running job whose cancellation was requested; their ids.

        The monitor calls this every ``cancel_check_s``; tests may call it directly.
        """
        return self.monitor.check_cancellations()

    def heartbeat(self) -> set[uuid.UUID]:
        """Refresh the sign of life of every held job; cancel those whose lease is gone.

        Returns the ids still held. The monitor calls this every ``heartbeat_s``.
        """
        return self.monitor.heartbeat()

    def sweep(self) -> int:
        """Re-queue or fail the zombies once (docs/contract.md §5); how many jobs it changed."""
        return self.sweeper.sweep()

    def run_end_hooks(self) -> int:
        """Run the due end hooks of jobs ended elsewhere once (decision 0025); how many it took.
        The hook pass calls this every ``poll_interval_s``; tests may call it directly."""
        return self.hooks.run_once()

    # -- the fence's exit -----------------------------------------------------------------------
    def _fence_wedged(self, reason: str) -> None:
        """Fenced handlers would not stop: end the process before another worker may run their
        jobs (the sweep re-queues them; the supervisor starts a new worker)."""
        log_event(log, logging.CRITICAL, "worker.fenced_exit", code=EXIT_FENCED, reason=reason)
        for handler in logging.getLogger().handlers:
            handler.flush()
        self.hard_exit(EXIT_FENCED)


def _thread(target: Callable[[], None], name: str) -> threading.Thread:
    # Daemon threads: a handler stuck in native code after its cancellation must not keep
    # the process alive once the worker has handed its job back.
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread
