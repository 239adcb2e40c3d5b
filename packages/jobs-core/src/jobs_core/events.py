"""The event feed: one event per visible committed change of a job (docs/events.md).

The core decides what a change *is* (:func:`change_kind`); the adapters record one
:class:`JobEvent` per change in commit order (the in-memory :class:`InMemoryEventLog` here, a
trigger-fed table in ``jobs_postgres.events``) and offer it through the :class:`EventFeed` port,
which the API's stream reads. A heartbeat (only ``heartbeat_at`` and ``progress.updated_at``
move) is no event.
"""

from __future__ import annotations

import collections
import enum
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from jobs_core.domain import Job, Status


class EventKind(enum.StrEnum):
    """What happened to a job (docs/events.md lists what each means)."""

    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    PROGRESS = "progress"
    CANCEL_REQUESTED = "cancel_requested"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REQUEUED = "requeued"
    DELETED = "deleted"
    UPDATED = "updated"
    WAITING = "waiting"


def _progress_without_beat(progress: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if progress is None:
        return None
    return {k: v for k, v in progress.items() if k != "updated_at"}


def change_kind(old: Job | None, new: Job | None) -> EventKind | None:
    """The kind of the change ``old`` → ``new`` (None: inserted / deleted), or None when
    nothing visible changed (a heartbeat). ``jobs_postgres`` mirrors this in SQL
    (``jobs_event_kind``); the contract suite checks they agree."""
    if old is None:
        return None if new is None else EventKind.ENQUEUED
    if new is None:
        return EventKind.DELETED
    if old.status is Status.QUEUED and new.status is Status.RUNNING:
        return EventKind.CLAIMED
    if new.status is not old.status and new.status.is_finished:
        return EventKind(new.status.value)
    if new.status is Status.QUEUED and old.status is not Status.QUEUED:
        return EventKind.REQUEUED
    if new.status is Status.WAITING and old.status is Status.RUNNING:
        return EventKind.WAITING  # its handler waits for its children (decision 0043)
    if (
        new.status is Status.RUNNING
        and old.cancel_requested_at is None
        and new.cancel_requested_at is not None
    ):
        return EventKind.CANCEL_REQUESTED
    old_progress = _progress_without_beat(old.progress)
    new_progress = _progress_without_beat(new.progress)
    if (
        new.status is Status.RUNNING
        and old.status is Status.RUNNING
        and old_progress != new_progress
    ):
        return EventKind.PROGRESS
    if (
        replace(old, progress=None, heartbeat_at=None)
        != replace(new, progress=None, heartbeat_at=None)
        or old_progress != new_progress
    ):
        return EventKind.UPDATED
    return None


@dataclass(frozen=True, order=True, slots=True)
class Position:
    """Where an event stands in the deployment's log; totally ordered.

    ``xid`` is the writing transaction's id on PostgreSQL (0 in memory), ``seq`` the row's
    number. Never shown to clients as such (the API encrypts it: docs/events.md).
    """

    xid: int
    seq: int


START = Position(0, 0)
"""Before every event."""


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One committed change: where it stands, what it was, when, and the job after it (before
    it, for ``deleted``)."""

    position: Position
    kind: EventKind
    at: datetime
    job: Job


@dataclass(frozen=True, slots=True)
class Present:
    """A moment of the log, as :meth:`EventFeed.present` takes it: which changes had committed.

    Positions do not follow commit order on PostgreSQL (a transaction's id is given when it
    starts writing), so a moment is not one position: every event at or before ``cursor`` had
    committed, every event at or after ``until`` had not, and between them an event had
    committed unless its ``xid`` is in ``running``. In memory ``cursor == until``.
    """

    cursor: Position
    until: Position
    running: frozenset[int] = frozenset()

    def committed(self, position: Position) -> bool:
        """Whether the change at ``position`` had committed at this moment."""
        return position <= self.cursor or (
            position < self.until and position.xid not in self.running
        )


@dataclass(frozen=True, slots=True)
class EventBatch:
    """What :meth:`EventFeed.read` found: events in order, and the cursor to read on from
    (past the last event, or further when the feed knows nothing else can come before)."""

    events: list[JobEvent]
    cursor: Position


class EventFeed(Protocol):
    """The committed changes of jobs, in commit order."""

    def read(self, after: Position, limit: int, org_id: str | None = None) -> EventBatch:
        """Up to ``limit`` events after ``after`` (of one org, or all): never one that a later
        read could find *before* the returned cursor."""
        ...

    def head(self) -> Position:
        """The cursor of the present: every event from now on comes after it."""
        ...

    def present(self) -> Present:
        """This moment: which changes have committed (for a stream to start exactly here)."""
        ...

    def horizon(self) -> Position:
        """Events at or before this may be gone (pruned): a reader behind it missed some."""
        ...

    def wait(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds. An adapter told of changes returns early when new
        events may be there; a polled one (PostgreSQL's) sleeps the whole timeout, so a reader
        reads after every wait either way. :meth:`close` ends a wait in progress."""
        ...

    def id_key(self) -> bytes:
        """The deployment's secret for the ids shown to clients (shared by its processes)."""
        ...

    def prune(self, before: datetime) -> int:
        """Forget the events written before ``before``; how many."""
        ...

    def close(self) -> None:
        """Release what the feed holds (a reading connection); a :meth:`wait` in progress
        returns."""
        ...


MEMORY_LOG_EVENTS = 100_000
"""The most events the in-memory log keeps; beyond, the oldest go (its horizon moves)."""


class InMemoryEventLog:
    """The :class:`EventFeed` of an ``InMemoryJobStore``: a bounded, thread-safe list."""

    def __init__(self, max_events: int = MEMORY_LOG_EVENTS) -> None:
        self._events: collections.deque[JobEvent] = collections.deque()
        self._max = max_events
        self._seq = 0
        self._horizon = START
        self._changed = threading.Condition()
        self._key = secrets.token_bytes(32)
        self._closes = 0

    def record(self, old: Job | None, new: Job | None) -> None:
        """Log the change ``old`` → ``new`` if it is visible (called under the store's lock,
        so the log's order is the order of the changes)."""
        kind = change_kind(old, new)
        if kind is None:
            return
        job = new if new is not None else old
        assert job is not None
        job = replace(job, lease=None)  # the fencing token is never logged
        with self._changed:
            self._seq += 1
            self._events.append(JobEvent(Position(0, self._seq), kind, datetime.now(UTC), job))
            while len(self._events) > self._max:
                self._horizon = self._events.popleft().position
            self._changed.notify_all()

    def read(self, after: Position, limit: int, org_id: str | None = None) -> EventBatch:
        """Events after ``after``, in order."""
        with self._changed:
            events = list(self._events)
            head = Position(0, self._seq)
        found: list[JobEvent] = []
        cursor = after
        for event in events:
            if event.position <= after:
                continue
            if len(found) >= limit:
                return EventBatch(found, cursor)
            cursor = event.position
            if org_id is None or event.job.org_id == org_id:
                found.append(event)
        return EventBatch(found, max(cursor, head))

    def head(self) -> Position:
        """The last event's position."""
        with self._changed:
            return Position(0, self._seq)

    def present(self) -> Present:
        """The last event's position (the log's order is the commit order)."""
        head = self.head()
        return Present(head, head)

    def horizon(self) -> Position:
        """The last event dropped from the bounded log."""
        with self._changed:
            return self._horizon

    def wait(self, timeout: float) -> None:
        """Until an event is recorded, :meth:`close`, or ``timeout``."""
        with self._changed:
            seq, closes = self._seq, self._closes
            self._changed.wait_for(lambda: (self._seq, self._closes) != (seq, closes), timeout)

    def id_key(self) -> bytes:
        """A random key of this process (the log does not outlive it)."""
        return self._key

    def prune(self, before: datetime) -> int:
        """Drop the events written before ``before``."""
        dropped = 0
        with self._changed:
            while self._events and self._events[0].at < before:
                self._horizon = self._events.popleft().position
                dropped += 1
        return dropped

    def close(self) -> None:
        """End the waits in progress; nothing else to release: the log lives as long as its
        store, and a later reader of the same store may wait on it again."""
        with self._changed:
            self._closes += 1
            self._changed.notify_all()


class EventedJobs(dict[Any, Job]):
    """The in-memory store's table: a dict that logs every change of a row to ``log``."""

    def __init__(self, log: InMemoryEventLog) -> None:
        super().__init__()
        self.log = log

    def __setitem__(self, key: Any, value: Job) -> None:
        self.log.record(self.get(key), value)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.log.record(self[key], None)
        super().__delitem__(key)
