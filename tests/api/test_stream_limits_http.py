"""Event streams against a real API process on PostgreSQL (docs/events.md, docs/sessions.md,
issue 23): a revoked token's or session's stream ends within the promised cache time even when
nothing happens on it, and a token, a session and an org hold a capped number of streams."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jobs_core import SystemClock
from jobs_tokens import TokenStore, issue_token, revoke_token

from tests.api.server import ApiProcess
from tests.api.sse import Stream

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CACHE_S = 5.0
"""JOBS_API_TOKEN_CACHE_S's default: the promised bound (a stream checks every third of it with
an answer at most that old: it ends within two thirds, the rest is the lookup's margin)."""


class Streams:
    """Streams opened in a test, closed at its end."""

    def __init__(self, tokens: TokenStore) -> None:
        self.tokens = tokens
        self.opened: list[Stream] = []

    def token(self, org: str) -> str:
        issued, _ = issue_token(self.tokens, org, "streams", SystemClock().now())
        return issued

    def open(self, api: ApiProcess, token: str | None = None, **kwargs: Any) -> Stream:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        stream = Stream(api.base_url, headers=headers, **kwargs)
        self.opened.append(stream)
        return stream


@pytest.fixture
def streams(pg_engine: Any) -> Iterator[Streams]:
    from jobs_postgres.tokens import PostgresTokenStore

    made = Streams(PostgresTokenStore(pg_engine))
    yield made
    for stream in made.opened:
        stream.close()


@pytest.fixture
def start(pg_url: str) -> Iterator[Any]:
    apis: list[ApiProcess] = []

    def started(**env: str) -> ApiProcess:
        apis.append(
            ApiProcess(
                {"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres", **env},
                ("tests.api.helpers:registry",),
            )
        )
        return apis[-1]

    yield started
    for api in apis:
        api.stop()


def seconds_until_it_ends(stream: Stream) -> float:
    """From now until the server ends ``stream`` (only keep-alive comments meanwhile)."""
    began = time.monotonic()
    while (event := stream.next(timeout=60)) is not None:
        assert event.name == "comment", f"a quiet stream got {event.name}"
    return time.monotonic() - began


def test_a_quiet_stream_ends_within_the_cache_time_once_its_token_is_revoked(
    start: Any, streams: Streams
) -> None:
    api = start()  # the default JOBS_API_TOKEN_CACHE_S (5) and keep-alive (15)
    token = streams.token("org-quiet")
    stream = streams.open(api, token)
    stream.until("ready")
    assert revoke_token(streams.tokens, token)
    assert seconds_until_it_ends(stream) < CACHE_S


def test_a_quiet_stream_of_a_session_ends_within_the_cache_time_once_its_token_is_revoked(
    start: Any, streams: Streams
) -> None:
    api = start()
    token = streams.token("org-quiet")
    with httpx.Client(base_url=api.base_url, timeout=30) as browser:
        assert browser.post("/session", json={"token": token}).status_code == 200
        stream = streams.open(api, cookies=dict(browser.cookies))
    stream.until("ready")
    assert revoke_token(streams.tokens, token)
    assert seconds_until_it_ends(stream) < CACHE_S


def refused(api: ApiProcess, token: str) -> httpx.Response:
    return httpx.get(
        f"{api.base_url}/jobs/events", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def test_a_token_and_an_org_hold_a_capped_number_of_streams(start: Any, streams: Streams) -> None:
    api = start(JOBS_EVENTS_MAX_STREAMS_PER_TOKEN="2", JOBS_EVENTS_MAX_STREAMS_PER_ORG="3")
    first, second, third = (streams.token("org-capped") for _ in range(3))
    held = [streams.open(api, first), streams.open(api, first)]
    assert all(stream.status == 200 for stream in held)

    over_token = refused(api, first)
    assert over_token.status_code == 429
    assert over_token.headers["content-type"] == "application/problem+json"
    assert over_token.headers["retry-after"] == "5"
    assert over_token.json()["type"] == "urn:jobs:problem:too-many-streams"
    assert "JOBS_EVENTS_MAX_STREAMS_PER_TOKEN" in over_token.json()["detail"]

    assert streams.open(api, second).status == 200  # another token of the org: its own count
    over_org = refused(api, third)
    assert over_org.status_code == 429
    assert "JOBS_EVENTS_MAX_STREAMS_PER_ORG" in over_org.json()["detail"]
    assert streams.open(api, streams.token("org-other")).status == 200  # another org: unaffected

    held[0].close()  # a stream that ends gives its place back
    deadline = time.monotonic() + 30
    while (again := streams.open(api, third)).status != 200:
        assert again.status == 429
        assert time.monotonic() < deadline, "the closed stream's place was never given back"
