"""The event stream while the database is away, on real HTTP (docs/events.md, ``store``): a
real API process whose database link goes through a proxy the test severs and restores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_events_http import World, kinds
from tests.postgres.proxy import LinkProxy

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def world(pg_url: str, pg_engine: Any) -> Iterator[World]:
    built = World(pg_url, pg_engine)
    yield built
    built.close()


@pytest.fixture
def link(pg_url: str) -> Iterator[LinkProxy]:
    proxy = LinkProxy(pg_url)
    yield proxy
    proxy.close()


def test_an_open_stream_is_told_the_store_is_away_and_back(world: World, link: LinkProxy) -> None:
    # A token trusted for a while: this stream does not need the database to stay open.
    api = world.start(
        JOBS_DATABASE_URL=link.url, JOBS_API_TOKEN_CACHE_S="3600", JOBS_EVENTS_KEEPALIVE_S="1"
    )
    stream = world.stream(api, world.token_a)
    assert stream.status == 200
    assert stream.until("ready").name == "ready"

    link.sever()
    away = stream.until("store")
    assert away.id is None  # no id: the client's last event id stays its last change
    assert away.json["reachable"] is False
    assert away.json["since"]
    assert stream.until("comment").data == "keep-alive"  # the stream itself stays open
    with world.http(api, world.token_a) as http:
        refused = world.stream(api, world.token_a)
        assert refused.status == 503  # a new stream meanwhile: the store is unreachable

        link.restore()
        back = stream.until("store", timeout=60)
        assert back.json == {"reachable": True, "since": None, "at": back.json["at"]}
        job_id = http.post("/jobs", json={"type": "noop"}).json()["id"]
        (enqueued,) = stream.jobs(1)
        assert kinds([enqueued]) == ["enqueued"]
        assert enqueued.json["job"]["id"] == job_id
    assert stream.quiet(0.5) == []  # told once each way, not on every read


def test_a_stream_whose_credential_cannot_be_checked_says_why_it_ends(
    world: World, link: LinkProxy
) -> None:
    api = world.start(JOBS_DATABASE_URL=link.url, JOBS_API_TOKEN_CACHE_S="1")
    stream = world.stream(api, world.token_a)
    assert stream.until("ready").name == "ready"
    link.sever()
    away = stream.until("store")
    assert away.json["reachable"] is False
    while (event := stream.next(timeout=30)) is not None:  # then it ends (the client
        assert event.name == "comment"  # reconnects and gets a 503 while the store is away)
