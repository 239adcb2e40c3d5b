"""``GET /jobs/events``: the org's job changes as Server-Sent Events (docs/events.md).

Each stream subscribes to the process's :class:`~jobs_api.event_hub.EventHub` and writes what it
is offered. A reconnecting client (``Last-Event-ID``) is replayed from the feed itself, so it
resumes across API restarts. While the store cannot be read, the stream says so (``store``).
Decision 0013 says why it is built this way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPBearer
from jobs_core import StoreUnavailable
from jobs_core.events import EventFeed, Position, Present
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from jobs_api.auth import CurrentOrgDep, credential_of, resolve_org
from jobs_api.event_frames import KEEPALIVE, Encoded, control_frame, encode_event, store_frame
from jobs_api.event_hub import EventHub, Subscriber
from jobs_api.problems import problem_responses
from jobs_api.schemas import StatusFilter

if TYPE_CHECKING:
    from jobs_api.containers import Container

__all__ = ["EventHub", "Subscriber", "router"]

log = logging.getLogger("jobs.api.events")

REPLAY_PAGE = 500
"""Events a resuming client is replayed per read of the feed."""

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
        history=container.reads().history(),
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
    history: EventFeed | None,
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
            async for frames, cursor in _replay(
                hub, subscriber, resume, until=present.cursor, history=history
            ):
                skip_upto = max(skip_upto, cursor)
                if frames:
                    yield frames
        checked = sent = time.monotonic()
        while True:
            if (news := _store_news(hub, subscriber)) is not None:
                yield news
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
                last = await _last_words(request, hub, subscriber, recheck_s)
                if last is not None:
                    yield last
                    return
    finally:
        hub.unsubscribe(subscriber)
        release()


def _store_news(hub: EventHub, subscriber: Subscriber) -> bytes | None:
    """The ``store`` frame the stream owes its client, if the store's state changed."""
    reachable = hub.down_since is None
    if subscriber.told_reachable == reachable:
        return None
    subscriber.told_reachable = reachable
    return store_frame(reachable, hub.down_since)


async def _last_words(
    request: Request, hub: EventHub, subscriber: Subscriber, recheck_s: float
) -> bytes | None:
    """None while the stream's credential holds; else what the stream sends before it ends:
    nothing when signed out or revoked, a ``store`` frame when the credential cannot be checked
    (the store away: the client reconnects, and gets a 503 while it is)."""
    try:
        authorized = await _still_authorized(request, recheck_s)
    except Exception as error:
        log.warning("event stream ends: its credential cannot be checked (%s)", error)
        told = subscriber.told_reachable
        return store_frame(False, hub.down_since or datetime.now(UTC)) if told else b""
    return None if authorized else b""


def _drain(queue: collections.deque[Encoded]) -> list[Encoded]:
    items = list(queue)
    queue.clear()
    return items


async def _replay(
    hub: EventHub,
    subscriber: Subscriber,
    after: Position,
    *,
    until: Position,
    history: EventFeed | None = None,
) -> AsyncIterator[tuple[bytes, Position]]:
    """The org's events after ``after`` read from the feed, page by page, as frames (filters
    applied, an older change of a job never after a newer one), at least up to ``until`` (the
    present of the subscription: the hub offers the stream every event after it).

    ``history`` (a standby's feed, ``JOBS_READ_DATABASE_URL``) is read first: its reads stop at
    the standby's boundary, which is complete up to there (the standby shows a prefix of the
    primary's commits). Once it has nothing more while its cursor is still before ``until``
    (the standby lags), the rest is read from the hub's feed (the primary), from that cursor:
    no event is skipped and none comes twice or out of order."""
    ids = hub.ids
    newest: dict[uuid.UUID, int] = {}
    cursor = after
    feed = history if history is not None else hub.feed
    while True:
        try:
            batch = await run_in_threadpool(feed.read, cursor, REPLAY_PAGE, subscriber.org_id)
        except StoreUnavailable as error:
            if feed is hub.feed:
                raise
            log.warning("the standby cannot be read (%s): the replay reads the primary", error)
            feed = hub.feed
            continue
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
            if feed is hub.feed or cursor >= until:
                return
            feed = hub.feed  # the standby has not replayed up to the subscription: the primary
