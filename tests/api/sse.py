"""A small Server-Sent Events reader for the stream tests: a thread reads a real HTTP stream and
queues each event (and each comment), so a test waits on conditions with deadlines."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Event:
    """One event of the stream (``name`` is ``comment`` for a ``:`` line)."""

    name: str
    id: str | None = None
    data: str = ""
    received_at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        """The data as JSON."""
        return json.loads(self.data)


class Stream:
    """``GET /jobs/events`` read on a thread; :meth:`next` and :meth:`until` wait for events."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        cookies: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> None:
        self.events: queue.Queue[Event | None] = queue.Queue()
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self._client = httpx.Client(
            base_url=base_url, timeout=httpx.Timeout(10, read=None), cookies=cookies
        )
        self._closing = threading.Event()
        self._opened = threading.Event()
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(
            target=self._read, args=(headers or {}, params or {}), daemon=True
        )
        self._thread.start()
        assert self._opened.wait(30), "the stream did not open"

    def _read(self, headers: dict[str, str], params: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", "/jobs/events", headers=headers, params=params) as r:
                self.status, self.headers = r.status_code, r.headers
                stream = r.extensions.get("network_stream")
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                self._opened.set()
                if r.status_code != 200:
                    r.read()
                    return
                current: dict[str, str] = {}
                for line in r.iter_lines():
                    if self._closing.is_set():
                        return
                    if line.startswith(":"):
                        self.events.put(Event("comment", data=line[1:].strip()))
                    elif line == "":
                        if current:
                            self.events.put(
                                Event(
                                    current.get("event", "message"),
                                    current.get("id"),
                                    current.get("data", ""),
                                )
                            )
                        current = {}
                    else:
                        key, _, value = line.partition(":")
                        current[key] = value[1:] if value.startswith(" ") else value
        except (httpx.HTTPError, RuntimeError):
            pass
        finally:
            self._opened.set()
            self.events.put(None)

    def next(self, timeout: float = 30) -> Event | None:
        """The next event (None when the stream ended); fails after ``timeout`` seconds."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout}s") from None

    def jobs(self, count: int, timeout: float = 60) -> list[Event]:
        """The next ``count`` ``job`` events (others skipped)."""
        found: list[Event] = []
        deadline = time.monotonic() + timeout
        while len(found) < count:
            event = self.next(max(0.1, deadline - time.monotonic()))
            assert event is not None, f"the stream ended after {len(found)} job events"
            if event.name == "job":
                found.append(event)
        return found

    def until(self, name: str, timeout: float = 30) -> Event:
        """The next event named ``name``."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next(max(0.1, deadline - time.monotonic()))
            assert event is not None, f"the stream ended before a {name!r} event"
            if event.name == name:
                return event

    def quiet(self, seconds: float) -> list[Event]:
        """Every non-comment event received within ``seconds`` (expected: none)."""
        got: list[Event] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                break
            if event is not None and event.name != "comment":
                got.append(event)
        return got

    def close(self) -> None:
        """Drop the connection: shutting the socket down wakes the reader blocked in ``recv``
        at once (closing the client alone left it waiting for the next keep-alive, up to 15 s)."""
        self._closing.set()
        if self._socket is not None:
            with contextlib.suppress(OSError):  # already closed by the server
                self._socket.shutdown(socket.SHUT_RDWR)
        self._client.close()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the stream's reader did not stop"
