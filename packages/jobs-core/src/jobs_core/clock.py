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
_uuid7_last = 0


def uuid7() -> uuid.UUID:
    """A time-ordered UUID (RFC 9562 version 7), ordered to the millisecond.

    The same layout as the ``uuidv7()`` default of the PostgreSQL table: 48 bits of Unix
    milliseconds, then random bits.
    """
    global _uuid7_last  # noqa: PLW0603 - process-wide monotonic counter
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        ms = max(ms, _uuid7_last)
        _uuid7_last = ms
        rand = int.from_bytes(os.urandom(10), "big")
        value = (ms & 0xFFFF_FFFF_FFFF) << 80 | rand & ((1 << 80) - 1)
        value = (value & ~(0xF << 76)) | (0x7 << 76)
        value = (value & ~(0x3 << 62)) | (0x2 << 62)
        return uuid.UUID(int=value)
