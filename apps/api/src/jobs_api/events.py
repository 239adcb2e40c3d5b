"""``GET /jobs/events``: the org's job changes as Server-Sent Events (docs/events.md).

One :class:`EventHub` per API process reads the store's event feed on one thread (one database
listener whatever the number of clients), encodes each event once, and hands it to the
subscribers of its org on the event loop. A subscriber's buffer is bounded: past it, what was
buffered is dropped and the client gets a ``resync`` event, never a silent gap. A reconnecting
client (``Last-Event-ID``) is replayed from the feed itself, so it resumes across API restarts.
While the feed cannot be read (the database away), every stream is told so with a ``store``
event, and told again when it can.
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
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPBearer
from jobs_core import Status, StoreUnavailable
from jobs_core.events import EventFeed, JobEvent, Position, Present
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from jobs_api.auth import CurrentOrgDep, credential_of, resolve_org
from jobs_api.event_frames import KEEPALIVE, Encoded, control_frame, encode_event, store_frame
from jobs_api.event_ids import EventIds
from jobs_api.problems import problem_responses
from jobs_api.schemas import StatusFilter

if TYPE_CHECKING:
    from jobs_api.containers import Container

log = logging.getLogger("jobs.api.events")

READ_BATCH = 1000
"""Events the hub reads from the feed at once."""
REPLAY_PAGE = 500
"""Events a resuming client is replayed per read of the feed."""
ORDER_MEMORY = 100_000
"""Jobs whose last delivered change the hub remembers (to never deliver an older one after)."""
PRUNE_EVERY_S = 60.0
SUBSCRIBE_WAIT_S = 10.0
"""How long a new stream waits for the hub's first read before a 503."""
READ_COALESCE_S = 0.05
"""The shortest time between two reads of the feed by the hub."""


# ---- the hub ---------------------------------------------------------------------------------


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


# ---- the route -------------------------------------------------------------------------------


class EventParams(BaseModel):
    """``GET /jobs/events`` query parameters (filters combine with AND)."""

    model_config = ConfigDict(extra="forbid")

    job_id: uuid.UUID | None = Field(default=None, description="Only this job's events.")
    type: str | None = Field(
        default=None, max_length=100, pattern=r"^[^\x00]*$", description="Only this type's."
    )
    status: StatusFilter | None = Field(
        default=None, description="Only events after which the job has this status (or group)."
    )
    last_event_id: str | None = Field(
        default=None,
        max_length=200,
        description="As the `Last-Event-ID` header, for clients that cannot set it.",
    )


_bearer = HTTPBearer(auto_error=False)


async def _still_authorized(request: Request, max_age_s: float) -> bool:
    try:
        await resolve_org(request, await _bearer(request), max_age_s)
    except HTTPException:
        return False
    return True


router = APIRouter()


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


@router.get(
    "/jobs/events",
    tags=["jobs"],
    summary="Follow the org's job changes (Server-Sent Events)",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "An endless `text/event-stream` (docs/events.md).",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **problem_responses(401, 422, 429, 503),
    },
)
async def job_events(
    request: Request,
    org: CurrentOrgDep,
    params: Annotated[EventParams, Query()],
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=200)] = None,
) -> StreamingResponse:
    """One `job` event per committed change of the org's jobs, after a `ready` event;
    `resync` when the client must re-read; `store` when the job store becomes unreachable and
    reachable again; `: keep-alive` comments when quiet."""
    container = _container(request)
    if not container.config.events():
        raise HTTPException(503, "the event stream is turned off on this API (JOBS_EVENTS=0)")
    hub = container.event_hub()
    subscriber = Subscriber(
        org_id=org,
        job_id=params.job_id,
        type=params.type,
        statuses=None if params.status is None else params.status.statuses(),
        buffer=hub.buffer,
    )
    keepalive_s = float(container.config.events_keepalive_s())
    # Checked every third of the cache time with an answer younger than that: a revoked
    # token's or signed-out session's stream ends within two thirds of the cache time (at
    # least 1 s in all), quiet or not, leaving a third for the lookup and the scheduling.
    recheck_s = max(float(container.config.api_token_cache_s()), 1.0) / 3
    raw_id = last_event_id if last_event_id is not None else params.last_event_id
    release = container.stream_limits().acquire(org, credential_of(request))  # or a 429
    try:
        present = await hub.subscribe(subscriber)  # before the 200: a 503 can still be answered
    except BaseException:
        release()
        raise
    stream = _stream(
        request,
        hub,
        subscriber,
        raw_id,
        present=present,
        keepalive_s=keepalive_s,
        recheck_s=recheck_s,
        release=release,
    )
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _stream(
    request: Request,
    hub: EventHub,
    subscriber: Subscriber,
    raw_id: str | None,
    *,
    present: Present,
    keepalive_s: float,
    recheck_s: float,
    release: Callable[[], None],
) -> AsyncIterator[bytes]:
    ids = hub.ids
    try:
        resume = None if raw_id is None else ids.decode(raw_id.strip())
        reason: str | None = None
        if raw_id is not None and resume is None:
            reason = "invalid_id"
        elif resume is not None:
            horizon = await run_in_threadpool(hub.feed.horizon)
            if resume < horizon:
                reason, resume = "expired", None
        start = present.cursor if resume is None else resume
        yield control_frame("ready", ids.encode(start), resumed=resume is not None)
        if reason is not None:
            yield control_frame("resync", ids.encode(present.cursor), reason=reason)
        # A fresh stream leaves out what had committed before its ready; a resumed one gets
        # every change after its id (replayed from the log, then live).
        before: Present | None = present if resume is None else None
        skip_upto = start
        if resume is not None:
            async for frames, cursor in _replay(hub, subscriber, resume):
                skip_upto = max(skip_upto, cursor)
                if frames:
                    yield frames
        checked = sent = time.monotonic()
        while True:
            reachable = hub.down_since is None
            if subscriber.told_reachable != reachable:
                subscriber.told_reachable = reachable
                yield store_frame(reachable, hub.down_since)
                sent = time.monotonic()
            if subscriber.resync_at is not None:
                at, subscriber.resync_at = subscriber.resync_at, None
                skip_upto = max(skip_upto, at)
                yield control_frame("resync", ids.encode(at), reason="slow_client")
            chunk = [
                e.frame
                for e in _drain(subscriber.queue)
                if e.position > skip_upto and (before is None or not before.committed(e.position))
            ]
            if chunk:
                yield b"".join(chunk)
                sent = time.monotonic()
            else:
                # Quiet: wake for the next change, the keep-alive or the credential's check,
                # whichever comes first (a quiet stream is checked on time too).
                subscriber.wake.clear()
                timeout = min(sent + keepalive_s, checked + recheck_s) - time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(subscriber.wake.wait(), timeout=max(timeout, 0))
                if time.monotonic() - sent >= keepalive_s:
                    yield KEEPALIVE
                    sent = time.monotonic()
            if time.monotonic() - checked >= recheck_s:
                checked = time.monotonic()
                try:
                    authorized = await _still_authorized(request, recheck_s)
                except Exception as error:  # the credential cannot be checked: the store away
                    log.warning("event stream ends: its credential cannot be checked (%s)", error)
                    if subscriber.told_reachable:
                        yield store_frame(False, hub.down_since or datetime.now(UTC))
                    return  # the client reconnects: a 503 while the store is away
                if not authorized:
                    return  # signed out, or the token revoked: the stream ends
    finally:
        hub.unsubscribe(subscriber)
        release()


def _drain(queue: collections.deque[Encoded]) -> list[Encoded]:
    items = list(queue)
    queue.clear()
    return items


async def _replay(
    hub: EventHub, subscriber: Subscriber, after: Position
) -> AsyncIterator[tuple[bytes, Position]]:
    """The org's events after ``after`` read from the feed, page by page, as frames (filters
    applied, an older change of a job never after a newer one)."""
    ids = hub.ids
    newest: dict[uuid.UUID, int] = {}
    cursor = after
    while True:
        batch = await run_in_threadpool(hub.feed.read, cursor, REPLAY_PAGE, subscriber.org_id)
        frames = []
        for event in batch.events:
            seen = newest.get(event.job.id)
            if seen is not None and event.position.seq < seen:
                continue
            newest[event.job.id] = event.position.seq
            encoded = encode_event(event, ids)
            if subscriber.wants(encoded):
                frames.append(encoded.frame)
        cursor = batch.cursor
        yield b"".join(frames), cursor
        if not batch.events:
            return
