"""The jobs of a chaos run: random durations and random per-attempt plans, from a seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from bench.chaos.jobtype import MAX_ATTEMPTS


@dataclass(frozen=True, slots=True)
class PlanConfig:
    """How the jobs of a run are drawn.

    Each attempt independently: ``retry_p`` retryable error, ``fail_p`` definitive failure,
    ``raise_p`` a bug, ``bad_return_p`` a non-mapping report, else ok; the plan stops at the
    first letter that ends the job. Durations: ``long_p`` of the jobs sleep uniformly between
    ``long_min_ms`` and ``long_max_ms`` (they are the ones a kill or a blackhole catches
    running), the rest an exponential draw of mean ``mean_ms`` (capped at 10x the mean).
    """

    mean_ms: float = 40.0
    long_p: float = 0.01
    long_min_ms: float = 3000.0
    long_max_ms: float = 10000.0
    retry_p: float = 0.08
    fail_p: float = 0.02
    raise_p: float = 0.02
    bad_return_p: float = 0.01

    def __post_init__(self) -> None:
        failures = self.retry_p + self.fail_p + self.raise_p + self.bad_return_p
        if not 0 <= failures < 1 or min(self.retry_p, self.fail_p, self.raise_p) < 0:
            raise ValueError("failure probabilities must be >= 0 and sum to less than 1")
        if not 0 <= self.long_p <= 1:
            raise ValueError("long_p must be between 0 and 1")
        if self.mean_ms < 0 or not 0 <= self.long_min_ms <= self.long_max_ms:
            raise ValueError("durations must be >= 0 and long_min_ms <= long_max_ms")


def draw_plan(rng: random.Random, config: PlanConfig, max_attempts: int = MAX_ATTEMPTS) -> str:
    """The plan letters of one job (see :mod:`bench.chaos.jobtype`)."""
    letters = []
    for _ in range(max_attempts):
        roll = rng.random()
        bounds = (
            ("r", config.retry_p),
            ("f", config.fail_p),
            ("x", config.raise_p),
            ("b", config.bad_return_p),
        )
        letter = "o"
        for candidate, p in bounds:
            if roll < p:
                letter = candidate
                break
            roll -= p
        letters.append(letter)
        if letter != "r":
            break
    return "".join(letters)


def draw_duration_ms(rng: random.Random, config: PlanConfig) -> int:
    """How long one job sleeps, in milliseconds."""
    if rng.random() < config.long_p:
        return round(rng.uniform(config.long_min_ms, config.long_max_ms))
    if config.mean_ms == 0:
        return 0
    return round(min(rng.expovariate(1 / config.mean_ms), 10 * config.mean_ms))


def payloads(rng: random.Random, n: int, config: PlanConfig) -> list[dict[str, Any]]:
    """``n`` payloads of the chaos type."""
    return [{"ms": draw_duration_ms(rng, config), "plan": draw_plan(rng, config)} for _ in range(n)]
