"""A fake search-analytics API for the ``import_api`` tests: a real HTTP server on an ephemeral
port of 127.0.0.1, in a thread of the test process (the worker processes of the kill -9 test
reach it over TCP like any source).

It serves ``rows`` in pages of ``page_size`` (cursor ``p<n>``: page n), checks the bearer token,
and misbehaves on demand: :meth:`FakeSource.fail` queues answers (a status, headers, a body) for
the next requests of a page, :meth:`FakeSource.gate` holds a page's answer until released, and
``body_for`` lets a test send any page body (not JSON, huge, a cursor loop).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "s3cr3t-token-9f8e7d6c5b4a"
"""The token the fake source accepts: a test looks for it everywhere it must not be."""


@dataclass
class Answer:
    """A scripted answer instead of the page."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"error": "scripted"}'


@dataclass
class Request:
    """What the source received."""

    page: int
    params: dict[str, str]
    authorization: str | None


class FakeSource:
    """The server's state; ``url`` is its endpoint."""

    def __init__(self, rows: list[Any], page_size: int = 3) -> None:
        self.rows = rows
        self.page_size = page_size
        self.requests: list[Request] = []
        self.scripted: dict[int, deque[Answer]] = {}
        self.gates: dict[int, threading.Event] = {}
        self.reached: dict[int, threading.Event] = {}
        self.body_for: Callable[[int], bytes | None] = lambda _page: None
        self.send_length = True  # False: no Content-Length, the body ends when the socket closes
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/rows"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def fail(self, page: int, *answers: Answer) -> None:
        """Answer the next requests of ``page`` with ``answers``, in order."""
        with self.lock:
            self.scripted.setdefault(page, deque()).extend(answers)

    def gate(self, page: int) -> tuple[threading.Event, threading.Event]:
        """Hold ``page``'s answer: (reached, release) — set when the page is asked for, and the
        event that lets it go."""
        with self.lock:
            self.reached[page] = threading.Event()
            self.gates[page] = threading.Event()
            return self.reached[page], self.gates[page]

    def pages(self) -> int:
        return max(1, -(-len(self.rows) // self.page_size))

    def page_body(self, page: int) -> bytes:
        start = (page - 1) * self.page_size
        following = f"p{page + 1}" if page < self.pages() else None
        rows = self.rows[start : start + self.page_size]
        return json.dumps({"rows": rows, "next_cursor": following}).encode()

    def answer(self, page: int) -> Answer:
        with self.lock:
            queued = self.scripted.get(page)
            if queued:
                return queued.popleft()
            reached, gate = self.reached.get(page), self.gates.get(page)
        if reached is not None and gate is not None:
            reached.set()
            gate.wait(60)
        body = self.body_for(page)
        return Answer(200, {"Content-Type": "application/json"}, body or self.page_body(page))

    def close(self) -> None:
        for gate in self.gates.values():
            gate.set()
        self.server.shutdown()
        self.server.server_close()


def _handler(source: FakeSource) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            params = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            cursor = params.get("cursor", "p1")
            page = int(cursor[1:]) if cursor[1:].isdigit() else 0
            authorization = self.headers.get("Authorization")
            with source.lock:
                source.requests.append(Request(page, params, authorization))
            if authorization != f"Bearer {TOKEN}":
                answer = Answer(401, body=b'{"error": "bad token"}')
            elif urlsplit(self.path).path != "/v1/rows" or page == 0:
                answer = Answer(404)
            else:
                answer = source.answer(page)
            try:
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if source.send_length:
                    self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            except OSError:  # the client is gone (a killed worker)
                pass

    return Handler


def fake_source(rows: list[Any], page_size: int = 3) -> Iterator[FakeSource]:
    """Run a source for the duration of a fixture."""
    source = FakeSource(rows, page_size)
    source.thread.start()
    try:
        yield source
    finally:
        source.close()


def search_rows(count: int, *, bad_every: int = 0) -> list[dict[str, Any]]:
    """``count`` rows the Search Console way (``page``, ``query``, numbers, ``date``); every
    ``bad_every``-th has clicks that are not a number."""
    rows = []
    for i in range(count):
        clicks: Any = "lots" if bad_every and i % bad_every == bad_every - 1 else i % 50
        rows.append(
            {
                "page": f"https://www.example.com/p{i % 40}",
                "query": f"query {i}",
                "clicks": clicks,
                "impressions": i % 900 + 50,
                "ctr": round((i % 50) / (i % 900 + 50), 4),
                "position": 1 + i % 30 + 0.5,
                "date": f"2025-01-{1 + i % 28:02d}",
                "country": "fra",
                "device": "DESKTOP",
            }
        )
    return rows
