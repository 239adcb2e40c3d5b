"""The pieces of the stream that need no server: the opaque ids and the hub's fan-out (on the
in-memory feed; the real-HTTP behaviour is in test_events_http.py)."""

from __future__ import annotations

import asyncio
import base64
import uuid

import pytest
from jobs_api.event_hub import EventHub, Subscriber
from jobs_api.event_ids import EventIds
from jobs_core import InMemoryJobStore, NewJob, SystemClock
from jobs_core.events import Position

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_ids_round_trip_and_reveal_nothing() -> None:
    ids = EventIds(b"k" * 32)
    position = Position(123456, 789)
    first, second = ids.encode(position), ids.encode(position)
    assert first != second  # a fresh nonce each time: equal positions look unrelated
    assert ids.decode(first) == position
    assert ids.decode(second) == position
    assert len(first) == len(ids.encode(Position(1, 1))) == 48


@pytest.mark.parametrize("raw", ["", "not base64!", "AAAA", "x" * 48, "A" * 48, "é" * 10, "=" * 48])
def test_made_up_ids_decode_to_nothing(raw: str) -> None:
    assert EventIds(b"k" * 32).decode(raw) is None


def test_an_altered_or_foreign_id_decodes_to_nothing() -> None:
    ids = EventIds(b"k" * 32)
    made = ids.encode(Position(5, 6))
    for index in range(len(made) - 2):  # every character but the base64 padding
        swapped = "B" if made[index] == "A" else "A"
        altered = made[:index] + swapped + made[index + 1 :]
        if base64.urlsafe_b64decode(altered) == base64.urlsafe_b64decode(made):
            continue  # the last character's unused low bits: the same bytes, the same id
        assert ids.decode(altered) is None
    assert EventIds(b"other key".ljust(32, b"!")).decode(made) is None


async def test_concurrent_first_subscribers_all_start() -> None:
    store = InMemoryJobStore()
    hub = EventHub(store.events, poll_s=0.05, retention_s=3600, buffer=10)
    try:
        subscribers = [Subscriber("org", None, None, None, buffer=10) for _ in range(20)]
        cursors = await asyncio.wait_for(
            asyncio.gather(*(hub.subscribe(s) for s in subscribers)), timeout=30
        )
        assert len(cursors) == 20
        assert hub.subscriber_count == 20
        store.insert(NewJob("org", "noop"), SystemClock().now())
        await asyncio.wait_for(subscribers[0].wake.wait(), timeout=30)
        assert all(len(s.queue) == 1 for s in subscribers)
    finally:
        hub.stop()


async def test_a_full_buffer_becomes_one_resync_and_other_orgs_get_nothing() -> None:
    store = InMemoryJobStore()
    hub = EventHub(store.events, poll_s=0.05, retention_s=3600, buffer=3)
    try:
        slow = Subscriber("org", None, None, None, buffer=3)
        other = Subscriber("other-org", None, None, None, buffer=3)
        follow = Subscriber("org", uuid.uuid4(), None, None, buffer=3)
        for s in (slow, other, follow):
            await hub.subscribe(s)
        now = SystemClock().now()
        for _ in range(5):
            store.insert(NewJob("org", "noop"), now)
        deadline = asyncio.get_running_loop().time() + 30
        while slow.resync_at is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        assert slow.resync_at is not None  # past its buffer: a resync is owed
        assert len(slow.queue) <= 3  # memory bounded
        assert not other.queue  # never another org's
        assert other.resync_at is None
        assert not follow.queue  # filtered on job_id
    finally:
        hub.stop()
