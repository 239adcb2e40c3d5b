"""Rate limits per key: at most N starts of a type's jobs per key in any window of P seconds
(issue 25 item 4, decision 0042, docs/flow-control.md "Rate limits").

A type declares ``rate_limit=(N, P)``. Its key is the type's flow key, derived from the payload
exactly as a concurrency key is (``concurrency_key``, scoped per org unless
``concurrency_scope`` is global: :func:`jobs_core.flow.flow_key`); a type with a rate limit and
no ``concurrency_key`` has one key per org (or one for the whole type, if global).

The rule is a **sliding window log**: a key keeps the times of its most recent starts, newest
first, at most N of them (:data:`Starts`). A job of the key may start at ``now`` while fewer
than N of them are later than ``now - P`` (:func:`room`); each start is recorded
(:func:`recorded`). So no window of P seconds, wherever it is placed, ever holds more than N
starts — a token bucket would let 2N through across a refill, which an upstream's quota or a
site's politeness rule counts as a breach. A "start" is a claim (``started_at``): every attempt
counts, a retry or a snoozed run too, because each one may call the upstream.

Pure: the in-memory store keeps the starts in a dict, PostgreSQL in ``job_rate_keys`` (one row
per key, written by the claim that starts jobs of it); both apply these functions' rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

RATE_COUNT_MAX = 1000
"""The largest N of a rate limit: a key keeps up to N start times (8 bytes each) and a claim
rewrites them whenever it starts one of its jobs."""

RATE_PERIOD_MAX_S = 86_400.0
"""The longest window of a rate limit, one day."""

Starts = tuple[datetime, ...]
"""The recorded starts of one key, newest first, at most N."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` starts per ``per_s`` seconds, for each key of the type."""

    count: int
    per_s: float

    @property
    def period(self) -> timedelta:
        return timedelta(seconds=self.per_s)

    @classmethod
    def declared(cls, value: object, type_name: str) -> RateLimit:
        """The rate limit a type declares as ``(N, per_seconds)``, or ValueError saying what is
        wrong: N an integer in [1, :data:`RATE_COUNT_MAX`], ``per_seconds`` a number in
        (0, :data:`RATE_PERIOD_MAX_S`]."""
        if isinstance(value, RateLimit):
            value = (value.count, value.per_s)
        if not isinstance(value, tuple | list) or len(value) != 2:
            raise ValueError(
                f"{type_name}: rate_limit must be a pair (N, per_seconds), e.g. (5, 1.0) for "
                f"5 starts per second, not {value!r}"
            )
        count, per = value
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(f"{type_name}: rate_limit's N must be an integer, not {count!r}")
        if not 1 <= count <= RATE_COUNT_MAX:
            raise ValueError(
                f"{type_name}: rate_limit's N must be between 1 and {RATE_COUNT_MAX}, got {count}"
            )
        if isinstance(per, bool) or not isinstance(per, int | float) or not math.isfinite(per):
            raise ValueError(
                f"{type_name}: rate_limit's per_seconds must be a number of seconds, not {per!r}"
            )
        if not 0 < per <= RATE_PERIOD_MAX_S:
            raise ValueError(
                f"{type_name}: rate_limit's per_seconds must be > 0 and at most "
                f"{RATE_PERIOD_MAX_S:g} (one day), got {per}"
            )
        return cls(count, float(per))


def in_window(starts: Iterable[datetime], rate: RateLimit, now: datetime) -> int:
    """How many of ``starts`` are in the window that ends at ``now`` (later than
    ``now - per``; a start recorded later than ``now`` by another claimer's clock counts)."""
    since = now - rate.period
    return sum(1 for at in starts if at > since)


def room(starts: Starts, rate: RateLimit, now: datetime) -> int:
    """How many jobs of the key may start at ``now``."""
    return max(0, rate.count - in_window(starts, rate, now))


def next_start(starts: Starts, rate: RateLimit, now: datetime) -> datetime | None:
    """When the next job of the key may start, if not at ``now``: the N-th newest start plus the
    period (None: it may start now)."""
    if room(starts, rate, now) > 0:
        return None
    return sorted(starts, reverse=True)[rate.count - 1] + rate.period


def recorded(starts: Starts, rate: RateLimit, now: datetime, started: int) -> Starts:
    """The starts of a key after ``started`` of its jobs started at ``now``: the newest N of
    them. Never pruned by this claimer's window: another claimer whose clock is behind this
    one's counts from an earlier instant, and the newest N are all any window needs."""
    return tuple(sorted((*(now,) * started, *starts), reverse=True)[: rate.count])
