"""Clocks and identifiers."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta


class SystemClock:
    """The real time, in UTC."""

    def now(self) -> datetime:
        """The current instant."""
        return datetime.now(UTC)


class FakeClock:
    """A clock that moves only when told to: tests never sleep to make time pass."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The current fake instant."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds`` and return the new instant."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, instant: datetime) -> None:
        """Jump to ``instant`` (timezone-aware)."""
        if instant.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware datetime")
        with self._lock:
            self._now = instant


_uuid7_lock = threading.Lock()
_uuid7_last = (0, 0)  # (milliseconds, the 74 random bits) of the last id made here
_RAND_BITS = (1 << 74) - 1


def _uuid7_layout(ms: int, rand: int) -> uuid.UUID:
    """48 bits of Unix milliseconds, the version (7), 12 + 62 random bits around the variant."""
    head = ((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76)
    return uuid.UUID(int=head | (rand >> 62) << 64 | (0x2 << 62) | (rand & ((1 << 62) - 1)))


def uuid7() -> uuid.UUID:
    """A time-ordered UUID (RFC 9562 version 7), strictly increasing within this process.

    The same layout as the ``uuidv7()`` default of the PostgreSQL table: 48 bits of Unix
    milliseconds, then random bits. Two ids made in the same millisecond (or after the clock
    stepped back) follow each other: the second's random bits are the first's plus one (RFC
    9562 §6.2, method 2), so jobs enqueued one after the other at the same instant run in
    that order (the claim order ends with the id; docs/contract.md §3).
    """
    global _uuid7_last  # noqa: PLW0603 - process-wide monotonic counter
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        rand = int.from_bytes(os.urandom(10), "big") & _RAND_BITS
        last_ms, last_rand = _uuid7_last
        if ms <= last_ms:
            ms, rand = last_ms, last_rand + 1
            if rand > _RAND_BITS:  # 2**74 ids in one millisecond: borrow the next one
                ms, rand = ms + 1, 0
        _uuid7_last = (ms, rand)
        return _uuid7_layout(ms, rand)


def ascending_uuid7s(count: int) -> list[uuid.UUID]:
    """``count`` RFC 9562 version-7 UUIDs in ascending order, after every id made before by
    :func:`uuid7` or here: the ids of one batch of jobs, so that the batch runs in input order
    on every store (the claim order ends with the id; docs/contract.md §3).

    The layout of :func:`uuid7`, made in bulk: one read of the random source, sorted as
    integers; in a millisecond that already gave ids, the batch counts on from the last one.
    """
    global _uuid7_last  # noqa: PLW0603 - process-wide monotonic counter
    pool = os.urandom(10 * count)
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        last_ms, last_rand = _uuid7_last
        if ms <= last_ms and last_rand + count <= _RAND_BITS:
            ms, randoms = last_ms, [last_rand + 1 + i for i in range(count)]
        else:
            ms = max(ms, last_ms + 1) if ms <= last_ms else ms
            randoms = sorted(
                int.from_bytes(pool[i : i + 10], "big") & _RAND_BITS
                for i in range(0, 10 * count, 10)
            )
        if randoms:
            _uuid7_last = (ms, randoms[-1])
    return [_uuid7_layout(ms, r) for r in randoms]
