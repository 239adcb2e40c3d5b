"""How a worker paces itself, and the exit codes it ends with (docs/worker.md, "Exit codes")."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_WEDGED = 4
"""The exit code of a worker one of whose handlers overran its timeout by more than
``timeout_grace_s`` (docs/worker.md, "Timeouts"): its other jobs were handed back, its
supervisor starts a new process (the only way to stop that code)."""

EXIT_FENCED = 5
"""The exit code of a worker that fenced itself and whose handlers would not stop in time
(docs/worker.md, "The lease fence"): its supervisor starts a new one."""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a :class:`~jobs_worker.worker.Worker` paces itself (all durations in seconds of real
    time).

    ``backoff_initial_s`` / ``backoff_cap_s`` bound the retries of a store call during an outage.
    ``prefetch``: jobs a claim may take beyond the free slots, at most, while handlers are short
    (:class:`~jobs_worker.worker.claiming.Demand`; 0: never more than the free slots);
    ``prefetch_window_s``: how long a prefetched job may expect to wait for a slot (the
    prefetch is what the slots start in that time at the handlers' recent pace).
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
    prefetch: int = 100
    prefetch_window_s: float = 0.05

    @property
    def margin_s(self) -> float:
        """The lease margin in use (``lease_margin_s``, or a fifth of the threshold)."""
        if self.lease_margin_s is not None:
            return self.lease_margin_s
        return self.sweep_threshold_s / 5

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.prefetch < 0:
            raise ValueError("prefetch must be >= 0")
        if self.prefetch_window_s < 0:
            raise ValueError("prefetch_window_s must be >= 0")
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
