"""The event hub of ``GET /jobs/events`` (docs/events.md): one per API process.

It reads the store's event feed on one thread (one database listener whatever the number of
clients), encodes each event once, and hands it to the subscribers of its org on the event loop.
A subscriber's buffer is bounded: past it, what was buffered is dropped and the client is owed a
``resync``, never a silent gap. While the feed cannot be read (the database away) it says so
(:attr:`EventHub.down_since`), and every stream tells its client with a ``store`` event.
Decision 0013 says why it is built this way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from jobs_core import Status, StoreUnavailable
from jobs_core.events import EventFeed, JobEvent, Position, Present
from starlette.concurrency import run_in_threadpool

from jobs_api.event_frames import Encoded, encode_event
from jobs_api.event_ids import EventIds

log = logging.getLogger("jobs.api.events")

READ_BATCH = 1000
"""Events the hub reads from the feed at once."""
ORDER_MEMORY = 100_000
"""Jobs whose last delivered change the hub remembers (to never deliver an older one after)."""
PRUNE_EVERY_S = 60.0
SUBSCRIBE_WAIT_S = 10.0
"""How long a new stream waits for the hub's first read before a 503."""
READ_COALESCE_S = 0.05
"""The shortest time between two reads of the feed by the hub."""


@dataclass(eq=False)
class Subscriber:
    """One open stream: its org and filters, and its bounded buffer of frames."""

    org_id: str
    job_id: uuid.UUID | None
    type: str | None
    statuses: frozenset[Status] | None
    buffer: int
    queue: collections.deque[Encoded] = field(default_factory=collections.deque)
    resync_at: Position | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    told_reachable: bool = True
    """What the stream last told its client of the store (a client assumes it reachable)."""

    def wants(self, event: Encoded) -> bool:
        """Whether the filters let ``event`` through (the org is checked by the hub)."""
        return (
            (self.job_id is None or event.job_id == self.job_id)
            and (self.type is None or event.type == self.type)
            and (self.statuses is None or event.status in self.statuses)
        )

    def offer(self, event: Encoded) -> None:
        """Buffer ``event``; past the buffer, drop everything and owe the client a resync."""
        if len(self.queue) >= self.buffer:
            self.queue.clear()
            self.resync_at = event.position
        else:
            self.queue.append(event)
        self.wake.set()


class EventHub:
    """The one reader of the event feed in this process, and the fan-out to its streams."""

    def __init__(
        self,
        feed: EventFeed,
        poll_s: float,
        retention_s: float,
        buffer: int,
    ) -> None:
        self.feed = feed
        self.buffer = buffer
        self._poll_s = poll_s
        self._retention = timedelta(seconds=retention_s)
        self._subscribers: dict[str, set[Subscriber]] = collections.defaultdict(set)
        self._last_seq: collections.OrderedDict[uuid.UUID, int] = collections.OrderedDict()
        self._ids: EventIds | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._started = asyncio.Lock()  # never a thread lock: start() awaits inside it
        self._loop: asyncio.AbstractEventLoop | None = None
        self.cursor: Position | None = None
        self._ready: asyncio.Event | None = None
        self._ready_set = False
        self.down_since: datetime | None = None
        """When the feed's reads began failing, or ``None`` while it is read (on the loop)."""
        self._thread_down = False  # the reader thread's own view of it

    @property
    def ids(self) -> EventIds:
        """The id codec (the key is read from the feed once)."""
        if self._ids is None:
            self._ids = EventIds(self.feed.id_key())
        return self._ids

    @property
    def subscriber_count(self) -> int:
        """Open streams in this process."""
        return sum(len(s) for s in self._subscribers.values())

    async def start(self) -> None:
        """Start the reader thread once (at the API's startup, else on the first stream).

        Never blocks on the database: the thread reads the feed's head itself, retrying while
        the database is away; :meth:`subscribe` waits for it.
        """
        async with self._started:
            if self._thread is None:
                self._loop = asyncio.get_running_loop()
                self._ready = asyncio.Event()
                self._thread = threading.Thread(target=self._run, name="jobs-events", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Stop the reader thread and the feed's listener."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.feed.close()

    async def subscribe(self, subscriber: Subscriber) -> Present:
        """Register a stream; every change not committed at the returned moment will be
        offered to it (with some that were: the stream leaves those out).

        The moment is the database's, taken *after* the stream is registered: the hub's
        cursor lags the database (it moves every poll, and jumps only while nobody listens),
        so a change committed before the stream opened can still be read and offered after;
        the moment tells it apart. Taken after the registration, no change later than it can
        have been dispatched before the stream was there to be offered it.

        Raises ``StoreUnavailable`` when the feed cannot be read within ``SUBSCRIBE_WAIT_S``.
        """
        await self.start()
        assert self._ready is not None
        try:
            await run_in_threadpool(lambda: self.ids)
            await asyncio.wait_for(self._ready.wait(), timeout=SUBSCRIBE_WAIT_S)
        except (TimeoutError, OSError) as error:
            raise StoreUnavailable(f"the event feed cannot be read: {error}") from None
        self._subscribers[subscriber.org_id].add(subscriber)
        try:
            return await run_in_threadpool(self.feed.present)
        except BaseException:
            self.unsubscribe(subscriber)
            raise

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Forget a closed stream."""
        mine = self._subscribers.get(subscriber.org_id)
        if mine is not None:
            mine.discard(subscriber)
            if not mine:
                del self._subscribers[subscriber.org_id]

    # -- the reader thread ----------------------------------------------------------------------
    def _run(self) -> None:
        mine: Position | None = None  # where this thread read up to, while it knows
        pruned_at = 0.0
        delay = 0.1
        while not self._stopping.is_set():
            try:
                if time.monotonic() - pruned_at > PRUNE_EVERY_S:
                    pruned_at = time.monotonic()
                    self.feed.prune(datetime.now(UTC) - self._retention)
                if not self._subscribers and self._ready_set:
                    # Nobody listens: no read, only the cursor kept at the present, so the
                    # first stream to open is not handed a backlog (_dispatch applies the jump
                    # only if still nobody listens).
                    self._publish([], self.feed.head(), jump=True)
                    self._store_state(reachable=True)
                    mine = None
                    self._stopping.wait(self._poll_s)
                    continue
                if mine is None:
                    mine = self.feed.head() if self.cursor is None else self.cursor
                    if self.cursor is None:
                        self._publish([], mine)
                batch = self.feed.read(mine, READ_BATCH)
                # Encoded here only for orgs that have a stream now (no stream: no cost);
                # _dispatch encodes the others if a stream of theirs opened meanwhile.
                orgs = set(self._subscribers)
                encoded: list[Encoded | JobEvent] = [
                    encode_event(event, self.ids) if event.job.org_id in orgs else event
                    for event in batch.events
                ]
                mine = batch.cursor
                self._publish(encoded, mine)
                self._store_state(reachable=True)
                delay = 0.1
                if len(batch.events) < READ_BATCH:
                    self.feed.wait(self._poll_s)
                    # Notifications arrive one per committed statement: reading at most every
                    # READ_COALESCE_S serves them in batches (the database's work stays flat).
                    self._stopping.wait(READ_COALESCE_S)
            except Exception as error:  # the database away: keep the cursor, try again
                log.warning("event feed read failed (%s); retrying in %.1fs", error, delay)
                self._store_state(reachable=False)
                self._stopping.wait(delay)
                delay = min(delay * 2, 5.0)

    def _store_state(self, *, reachable: bool) -> None:
        """On a change only: hand the store's state to the loop, which tells every stream."""
        if self._thread_down != reachable:
            return
        self._thread_down = not reachable
        since = None if reachable else datetime.now(UTC)
        loop = self._loop
        assert loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is closed: the app is shutting down
            loop.call_soon_threadsafe(self._set_store_state, since)

    def _set_store_state(self, since: datetime | None) -> None:
        self.down_since = since
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                subscriber.wake.set()

    def _publish(
        self, events: list[Encoded | JobEvent], cursor: Position, *, jump: bool = False
    ) -> None:
        loop = self._loop
        assert loop is not None
        try:
            loop.call_soon_threadsafe(self._dispatch, events, cursor, jump)
        except RuntimeError:  # the loop is closed: the app is shutting down
            self._stopping.set()

    def _dispatch(
        self, events: list[Encoded | JobEvent], cursor: Position, jump: bool = False
    ) -> None:
        if jump and self._subscribers:
            return  # a stream opened since the thread saw none: keep reading from the cursor
        done = self.cursor
        last_seq = self._last_seq
        for item in events:
            if done is not None and item.position <= done:
                continue  # already dispatched
            if isinstance(item, JobEvent):
                if item.job.org_id not in self._subscribers:
                    continue  # no stream of that org
                item = encode_event(item, self.ids)  # noqa: PLW2901 - a stream opened meanwhile
            event = item
            previous = last_seq.pop(event.job_id, None)
            if previous is not None and event.position.seq < previous:
                # An older change of this job after a newer one was delivered: superseded.
                last_seq[event.job_id] = previous
                continue
            last_seq[event.job_id] = event.position.seq
            if len(last_seq) > ORDER_MEMORY:
                last_seq.popitem(last=False)
            for subscriber in self._subscribers.get(event.org_id, ()):
                if subscriber.wants(event):
                    subscriber.offer(event)
        self.cursor = cursor if done is None else max(done, cursor)
        if self._ready is not None:
            self._ready.set()
            self._ready_set = True
