"""How many jobs a claim asks for: the free slots, and a few more while handlers are short.

A claim that takes only the free slots pays a round trip (and a commit) per job when handlers
are short: the slot waits for the next claim after every job. So the completer asks for more:
the *prefetch*, jobs claimed before a slot is free, that the slots run back to back as they
free up. A prefetched job is claimed like any other (running, its attempt counted, heartbeaten,
cancellable, handed back at a stop), it only waits in this worker for a slot. Its wait is what
prefetch costs, so :class:`Demand` sizes it from the handlers' recent durations: no more than
the slots can start within ``prefetch_window_s`` (docs/worker.md, "Prefetch"), at most
``prefetch``, and none at all until a handler has ended (a worker of long handlers never
prefetches).
"""

from __future__ import annotations

import threading

EWMA_WEIGHT = 0.2
"""The weight of the newest handler duration in the running average."""


class Demand:
    """The size of the next claim of one worker."""

    def __init__(self, concurrency: int, prefetch: int, window_s: float) -> None:
        self.concurrency = concurrency
        self.prefetch_max = prefetch
        self.window_s = window_s
        self._lock = threading.Lock()
        self._mean_s: float | None = None

    def observe(self, duration_s: float) -> None:
        """A handler ran ``duration_s`` seconds (from any slot's thread)."""
        with self._lock:
            mean = self._mean_s
            self._mean_s = duration_s if mean is None else mean + EWMA_WEIGHT * (duration_s - mean)

    @property
    def mean_s(self) -> float | None:
        """The running average of the handlers' durations (None before the first ends)."""
        return self._mean_s

    def prefetch(self) -> int:
        """Jobs to hold beyond the slots now: what the slots start within the window."""
        mean = self._mean_s
        if mean is None or self.prefetch_max == 0:
            return 0
        if mean <= 0:
            return self.prefetch_max
        return min(self.prefetch_max, int(self.window_s * self.concurrency / mean))

    def wanted(self, inflight: int) -> int:
        """How many jobs to claim with ``inflight`` attempts executing or waiting for a slot."""
        return max(0, self.concurrency + self.prefetch() - inflight)
