"""Retry policies: which errors are worth another attempt, and how long to wait before it.

Backoffs are small pure functions of the attempt number (1 for the first attempt), as in
oban-py, so a type can compose its own: ``exponential(base_s=1, cap_s=60)``, ``jitter(...)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

Backoff = Callable[[int], float]


def exponential(base_s: float = 2.0, factor: float = 2.0, cap_s: float = 3600.0) -> Backoff:
    """``base_s * factor**(attempt-1)`` seconds, capped: 2 s, 4 s, 8 s… by default
    (docs/contract.md §2)."""
    if base_s < 0 or factor < 1 or cap_s < 0:
        raise ValueError("exponential backoff needs base_s >= 0, factor >= 1, cap_s >= 0")

    def delay(attempt: int) -> float:
        return float(min(cap_s, base_s * factor ** max(0, attempt - 1)))

    return delay


def constant(seconds: float) -> Backoff:
    """The same delay after every attempt."""
    return lambda _attempt: seconds


def jitter(backoff: Backoff, ratio: float = 0.1, rng: random.Random | None = None) -> Backoff:
    """``backoff`` spread by ±``ratio`` so that a burst of failures does not retry in lockstep."""
    source = rng or random.Random()

    def delay(attempt: int) -> float:
        base = backoff(attempt)
        return max(0.0, base * (1 + source.uniform(-ratio, ratio)))

    return delay


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which exceptions re-queue the job (none by default: docs/contract.md §2 makes an uncaught
    exception a definitive failure) and the delay before the next attempt."""

    retry_on: tuple[type[BaseException], ...] = ()
    backoff: Backoff = field(default_factory=exponential)

    def is_retryable(self, error: BaseException) -> bool:
        """True when ``error`` is one of the declared retryable exceptions."""
        return bool(self.retry_on) and isinstance(error, self.retry_on)

    def delay_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt``."""
        return self.backoff(attempt)
