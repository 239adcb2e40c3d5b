"""A small, bounded HTTP/1.1 load generator for the API benchmark (asyncio streams, stdlib only).

Why not httpx or wrk: the box has two cores shared by the client, uvicorn and PostgreSQL, so the
client must cost as little CPU as possible (a raw keep-alive request costs a few tens of
microseconds here, an httpx one several hundred), and the benchmark must run anywhere the
project's virtualenv does, with no system package. It only ever talks to ``127.0.0.1``.

Two shapes of load:

- :func:`closed_loop`: ``connections`` clients each send a request as soon as the previous answer
  arrived, for ``duration_s``: the server's throughput;
- :func:`pollers`: ``count`` pollers each ask every ``interval_s`` (a web page polling its job):
  a fixed offered load whose latency is measured from the *scheduled* send time, so a slow answer
  delays the next request's figure too (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class LoadResult:
    """What one load run saw."""

    requests: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def rps(self) -> float:
        """Answered requests per second."""
        return self.requests / self.elapsed_s if self.elapsed_s else 0.0


class Connection:
    """One keep-alive HTTP/1.1 connection sending GET requests."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the load generator only talks to the loopback interface")
        self.host = host
        self.port = port
        self._head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> int:
        """Send ``GET path`` and read the whole answer; its status code."""
        if self._writer is None or self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        request = f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self._head}\r\n"
        self._writer.write(request.encode())
        status_line = await self._reader.readline()
        if not status_line:
            await self.close()
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        closing = False
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            lowered = name.strip().lower()
            if lowered == b"content-length":
                length = int(value.strip())
            elif lowered == b"connection" and value.strip().lower() == b"close":
                closing = True
            elif lowered == b"transfer-encoding":
                raise ConnectionError("chunked answers are not expected from GET /jobs/{id}")
        if length:
            await self._reader.readexactly(length)
        if closing:
            await self.close()
        return status

    async def close(self) -> None:
        """Close the socket (a later :meth:`get` reconnects)."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
        self._reader = self._writer = None


def _count(result: LoadResult, status: int, started: float, ended: float) -> None:
    result.requests += 1
    result.statuses[status] = result.statuses.get(status, 0) + 1
    if status != 200:
        result.errors += 1
    result.latencies_ms.append((ended - started) * 1000)


async def closed_loop(
    host: str,
    port: int,
    headers: dict[str, str],
    paths: Sequence[str],
    *,
    connections: int,
    duration_s: float,
    warmup_s: float = 0.5,
) -> LoadResult:
    """``connections`` clients back to back for ``duration_s`` (after ``warmup_s`` unmeasured)."""
    result = LoadResult()
    rng = random.Random(1)
    begin = time.perf_counter()
    measure_from = begin + warmup_s
    stop_at = measure_from + duration_s

    async def client() -> None:
        conn = Connection(host, port, headers)
        try:
            while (now := time.perf_counter()) < stop_at:
                try:
                    status = await conn.get(rng.choice(paths))
                except (ConnectionError, OSError, asyncio.IncompleteReadError):
                    status = 599
                    await conn.close()
                if now >= measure_from:
                    _count(result, status, now, time.perf_counter())
        finally:
            await conn.close()

    await asyncio.gather(*(client() for _ in range(connections)))
    result.elapsed_s = duration_s
    return result


async def pollers(
    host: str,
    port: int,
    headers: dict[str, str],
    paths: Sequence[str],
    *,
    count: int,
    interval_s: float,
    duration_s: float,
) -> LoadResult:
    """``count`` pollers, each on its own job, each asking every ``interval_s``."""
    result = LoadResult()
    begin = time.perf_counter() + 0.2
    stop_at = begin + duration_s

    async def poller(index: int) -> None:
        conn = Connection(host, port, headers)
        path = paths[index % len(paths)]
        # Staggered starts spread the pollers over one interval, as independent pages would be.
        scheduled = begin + interval_s * index / count
        try:
            while scheduled < stop_at:
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                try:
                    status = await conn.get(path)
                except (ConnectionError, OSError, asyncio.IncompleteReadError):
                    status = 599
                    await conn.close()
                _count(result, status, scheduled, time.perf_counter())
                scheduled += interval_s
        finally:
            await conn.close()

    await asyncio.gather(*(poller(i) for i in range(count)))
    result.elapsed_s = time.perf_counter() - begin
    return result
