"""The Overview's rules (issue 24, item 4): what an org's operations view counts and charts, and
how a job is found by a part of its id. Both stores apply them (:class:`jobs_core.ports.Overview`;
the memory store in :mod:`jobs_core.memory_overview`, PostgreSQL in SQL in
``jobs_postgres.overview_rows``); the contract part ``jobs_contract.overview`` checks they agree.

- **Counts** (:class:`TypeCounts`): the org's jobs per type and status, following the list's
  filters (a status set, a type), as ``GET /jobs`` would list them.
- **Series** (:class:`TypeSeries`): over a :class:`Window` (the last hour in minutes, the last day
  in half hours, :data:`WINDOWS`), per type and bucket, the jobs that finished in the bucket (by
  ``finished_at``: done, failed, cancelled), their wait (:func:`wait_s`: the last attempt's start
  minus the later of enqueue and ``run_at``) and the run time of every attempt that ended in the
  bucket (``job_attempts``: ``ended_at - started_at``), each as p50 and p95 by linear
  interpolation (:func:`percentile`, PostgreSQL's ``percentile_cont``). A bucket is the
  half-open ``[start, start + bucket)``, aligned on multiples of its size since the Unix epoch
  (:func:`bucket_start`, ``date_bin`` with the epoch as origin); the window ends with the bucket
  holding ``now``. Buckets with nothing are in the series with zero counts and no percentiles.
- **Finding a job by a part of its id**: a full id, a prefix of at least :data:`MIN_PREFIX`
  hex digits (:func:`prefix_bounds`: a range of the primary key), or the short id the panel's
  table shows, its **last** :data:`SHORT_ID_LEN` hex digits (a UUIDv7's first digits are its
  creation time, the same for every job of a minute: the last ones tell rows apart); eight
  digits are looked up as both (the short id, and the first eight digits), every match a
  candidate. :func:`parse_lookup` says which, or why the text is none.
"""

from __future__ import annotations

import enum
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from jobs_core.states import FINISHED, Status

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The origin of the buckets (``date_bin``'s third argument)."""


class Window(enum.StrEnum):
    """How far back a series goes: ``hour`` (60 one-minute buckets), ``day`` (48 of 30 min)."""

    HOUR = "hour"
    DAY = "day"

    @property
    def bucket(self) -> timedelta:
        """The size of one bucket."""
        return WINDOWS[self][0]

    @property
    def buckets(self) -> int:
        """How many buckets the window holds."""
        return WINDOWS[self][1]


WINDOWS: Mapping[Window, tuple[timedelta, int]] = {
    Window.HOUR: (timedelta(minutes=1), 60),
    Window.DAY: (timedelta(minutes=30), 48),
}


def window_of(raw: str) -> Window:
    """The window named ``raw``; ValueError saying which names exist."""
    try:
        return Window(raw)
    except ValueError:
        names = ", ".join(w.value for w in Window)
        raise ValueError(f"unknown window {raw!r}: use one of {names}") from None


def bucket_start(at: datetime, bucket: timedelta) -> datetime:
    """The start of the bucket of size ``bucket`` holding ``at`` (``date_bin(bucket, at,
    epoch)``)."""
    size = int(bucket.total_seconds() * 1_000_000)
    offset = (at - EPOCH) // timedelta(microseconds=1)
    return EPOCH + timedelta(microseconds=offset - offset % size)


def window_start(window: Window, now: datetime) -> datetime:
    """The first instant a series over ``window`` at ``now`` covers: ``buckets - 1`` whole
    buckets before the one holding ``now``."""
    return bucket_start(now, window.bucket) - window.bucket * (window.buckets - 1)


def bucket_starts(window: Window, now: datetime) -> list[datetime]:
    """The start of each bucket of the window, oldest first."""
    first = window_start(window, now)
    return [first + window.bucket * n for n in range(window.buckets)]


def wait_s(created_at: datetime, run_at: datetime, started_at: datetime | None) -> float | None:
    """How long a job waited before its last attempt started: from the later of its enqueue
    and its ``run_at`` (a scheduled job or a retry's backoff is not waiting before it is due);
    None for a job that never started."""
    if started_at is None:
        return None
    return (started_at - max(created_at, run_at)).total_seconds()


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The ``fraction`` percentile of ``values`` by linear interpolation between the closest
    ranks (PostgreSQL's ``percentile_cont``); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class Bucket:
    """One bucket of a type's series: the jobs that finished in it, by status, and the p50/p95
    of their waits and of the run time of the attempts that ended in it (seconds; None when the
    bucket had none)."""

    start: datetime
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    wait_p50: float | None = None
    wait_p95: float | None = None
    run_p50: float | None = None
    run_p95: float | None = None

    @property
    def finished(self) -> int:
        """Every job that finished in the bucket."""
        return self.done + self.failed + self.cancelled


@dataclass(frozen=True, slots=True)
class BucketFacts:
    """What a store reads for one (type, bucket): the finished counts and the percentiles,
    as :class:`Bucket` holds them. A store returns only the pairs that had something."""

    type: str
    start: datetime
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    wait_p50: float | None = None
    wait_p95: float | None = None
    run_p50: float | None = None
    run_p95: float | None = None


@dataclass(frozen=True, slots=True)
class TypeSeries:
    """One type's series over a window: every bucket, oldest first."""

    type: str
    buckets: list[Bucket]


@dataclass(frozen=True, slots=True)
class Series:
    """The series of every type that finished a job or ended an attempt in the window."""

    window: Window
    start: datetime
    bucket_s: float
    types: list[TypeSeries] = field(default_factory=list)


def series_of(window: Window, now: datetime, facts: Iterable[BucketFacts]) -> Series:
    """The full series from a store's facts: every bucket of the window for each type named,
    empty ones with zero counts, types sorted by name. Facts outside the window are dropped."""
    starts = bucket_starts(window, now)
    index = {start: n for n, start in enumerate(starts)}
    by_type: dict[str, list[Bucket]] = {}
    for fact in facts:
        n = index.get(fact.start)
        if n is None:
            continue
        row = by_type.setdefault(fact.type, [Bucket(start) for start in starts])
        row[n] = Bucket(
            fact.start,
            fact.done,
            fact.failed,
            fact.cancelled,
            fact.wait_p50,
            fact.wait_p95,
            fact.run_p50,
            fact.run_p95,
        )
    return Series(
        window,
        starts[0],
        window.bucket.total_seconds(),
        [TypeSeries(name, by_type[name]) for name in sorted(by_type)],
    )


FINISHED_STATUSES: tuple[Status, ...] = tuple(s for s in Status if s in FINISHED)
"""The statuses a series counts (done, failed, cancelled), in :class:`Status` order."""


@dataclass(frozen=True, slots=True)
class TypeCounts:
    """One type's jobs counted by status (every status present, zero included)."""

    type: str
    counts: dict[Status, int]

    @property
    def total(self) -> int:
        """Every job of the type counted."""
        return sum(self.counts.values())


def type_counts_of(rows: Iterable[tuple[str, Status, int]]) -> list[TypeCounts]:
    """``(type, status, count)`` rows as one :class:`TypeCounts` per type, sorted by name."""
    by_type: dict[str, dict[Status, int]] = {}
    for type_name, status, count in rows:
        by_type.setdefault(type_name, dict.fromkeys(Status, 0))[status] += count
    return [TypeCounts(name, by_type[name]) for name in sorted(by_type)]


# -- finding a job by a part of its id ---------------------------------------------------------
MIN_PREFIX = 8
"""The shortest prefix of an id a lookup takes (8 hex digits)."""
SHORT_ID_LEN = 8
"""The hex digits the panel's table shows of an id: its last ones (``format.js`` ``shortId``)."""
LOOKUP_CANDIDATES = 10
"""At most this many jobs come back from an ambiguous lookup (the API's 409 lists them)."""

_HEX = re.compile(r"[0-9a-f]+")


class LookupKind(enum.StrEnum):
    """What a search text is: a whole id, a prefix of one, or 8 digits (the panel's short id,
    a suffix, or the first 8: both are looked up)."""

    ID = "id"
    PREFIX = "prefix"
    SHORT = "short"


@dataclass(frozen=True, slots=True)
class Lookup:
    """A parsed search: its kind and its hex digits (lower case, no dashes)."""

    kind: LookupKind
    digits: str


def parse_lookup(raw: str) -> Lookup:
    """What ``raw`` is; ValueError saying what to send instead.

    Spaces around it and dashes are ignored, case too: a full id (32 hex digits), the short id
    of the table (exactly :data:`SHORT_ID_LEN` digits: its last ones, as shown, or its first
    ones), or a prefix of 9 to 31 digits.
    """
    digits = raw.strip().lower().replace("-", "")
    if not digits or not _HEX.fullmatch(digits):
        raise ValueError(
            f"{raw.strip()[:40]!r} is not a job id: send a full id, the 8 characters the "
            "panel shows, or at least 8 of its first hex digits"
        )
    if len(digits) == 32:
        return Lookup(LookupKind.ID, digits)
    if len(digits) > 32:
        raise ValueError("a job id has 32 hex digits; this text has more")
    if len(digits) == SHORT_ID_LEN:
        return Lookup(LookupKind.SHORT, digits)
    if len(digits) < MIN_PREFIX:
        raise ValueError(
            f"{digits!r} is too short: send at least {MIN_PREFIX} hex digits of the id "
            "(the 8 the panel shows, or its first ones)"
        )
    return Lookup(LookupKind.PREFIX, digits)


def prefix_bounds(prefix: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest id that start with the hex ``prefix`` (a primary-key range)."""
    if not _HEX.fullmatch(prefix) or not MIN_PREFIX <= len(prefix) <= 32:
        raise ValueError(f"a prefix is {MIN_PREFIX} to 32 hex digits, not {prefix!r}")
    return uuid.UUID(prefix.ljust(32, "0")), uuid.UUID(prefix.ljust(32, "f"))


def has_short_id(job_id: uuid.UUID, short: str) -> bool:
    """Whether the table's short id of ``job_id`` is ``short``."""
    return job_id.hex.endswith(short)
