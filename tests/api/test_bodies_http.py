"""Request bodies against a real API process, over a raw socket (docs/http.md, issue 23): a
chunked body over the limit is cut at the limit and its connection closed, with or without
credentials, on every route, whether the route reads a body or not."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from jobs_core import SystemClock
from jobs_tokens import issue_token

from tests.api.server import ApiProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

LIMIT = 64 * 1024
CHUNK = 64 * 1024
OFFERED = 128 * 1024 * 1024
"""What the client tries to send: far past the limit."""
ACCEPTED_BOUND = 48 * 1024 * 1024
"""Past the limit, at most the sockets' buffers on both sides may still take bytes (the
loopback's receive buffer grows to 32 MiB on this kind of machine); a server that keeps
reading takes all of OFFERED."""


@pytest.fixture(scope="module")
def api(pg_url: str) -> Iterator[ApiProcess]:
    started = ApiProcess(
        {"JOBS_DATABASE_URL": pg_url, "JOBS_STORE": "postgres", "JOBS_MAX_BODY_BYTES": str(LIMIT)},
        ("tests.api.helpers:registry",),
    )
    yield started
    started.stop()


@pytest.fixture
def token(pg_engine: Any) -> str:
    from jobs_postgres.tokens import PostgresTokenStore

    issued, _ = issue_token(PostgresTokenStore(pg_engine), "org-bodies", None, SystemClock().now())
    return issued


def push_chunked(api: ApiProcess, head: str) -> tuple[int, bytes]:
    """Send ``head`` then chunks until the server closes the connection or OFFERED is sent;
    the bytes of body sent and what the server answered."""
    host, port = api.base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    chunk = b"%x\r\n" % CHUNK + b"x" * CHUNK + b"\r\n"
    sent = 0
    try:
        sock.sendall(head.encode("latin-1") + b"Transfer-Encoding: chunked\r\n\r\n")
        while sent < OFFERED:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += CHUNK
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except (ConnectionResetError, TimeoutError):
            pass
        return sent, answer
    finally:
        sock.close()


ROUTES = [
    pytest.param("POST /jobs", True, b"413", id="enqueue-with-token"),
    pytest.param("POST /jobs", False, b"401", id="enqueue-anonymous"),
    pytest.param("POST /session", False, b"413", id="sign-in-anonymous"),
    pytest.param("GET /jobs", True, b"200", id="list-reads-no-body"),
    pytest.param("GET /healthz", False, b"200", id="health-reads-no-body"),
    pytest.param("POST /no/such/route", False, b"404", id="no-route"),
    pytest.param("PUT /jobs", True, b"405", id="wrong-method"),
]


@pytest.mark.parametrize(("line", "with_token", "status"), ROUTES)
def test_a_chunked_body_past_the_limit_is_cut_and_the_connection_closed(
    api: ApiProcess, token: str, line: str, with_token: bool, status: bytes
) -> None:
    auth = f"Authorization: Bearer {token}\r\n" if with_token else ""
    head = (
        f"{line} HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
        f"Cookie: jobs_session=x\r\n{auth}"
    )
    sent, answer = push_chunked(api, head)
    assert sent < ACCEPTED_BOUND, f"the server read {sent} bytes of a body it had refused"
    # The answer may be lost to the reset when the server closes with unread bytes; when it
    # arrives, it is the route's and says the connection is closed.
    if answer:
        assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
        assert b"connection: close" in answer.lower()


def test_a_413_always_closes_the_connection(api: ApiProcess) -> None:
    body = b'{"token": "' + b"x" * (LIMIT + 1) + b'"}'
    host, port = api.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            b"POST /session HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        answer = b""
        while data := sock.recv(65536):  # EOF: the server closed the connection
            answer += data
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"connection: close" in answer.lower()
