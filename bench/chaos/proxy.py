"""A TCP proxy in front of the chaos server that can go silent: a link that neither answers nor
closes, then heals.

While :meth:`BlackholeProxy.blackhole` is on, the proxy stops reading from every socket it
holds, in both directions, and forwards nothing; it closes nothing either. New connections are
accepted and wait the same way. :meth:`BlackholeProxy.restore` resumes forwarding: the bytes
held in the kernel's buffers meanwhile are delivered late, none is lost, as after a network
partition that healed before TCP gave up.

What the worker sees is a *frozen* peer: its bytes are accepted by the proxy's kernel (loopback
acknowledges them), so neither TCP keepalives nor ``TCP_USER_TIMEOUT`` can tell; only a deadline
kept by the application itself (a lease it cannot renew) can. That is the harder of the two
silent-network cases, and the one the issue found.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

_CHUNK = 65536


class BlackholeProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (a unix socket path or ``(host, port)``)."""

    def __init__(self, target: str | tuple[str, int]) -> None:
        self._target: tuple[int, Any] = (
            (socket.AF_UNIX, target) if isinstance(target, str) else (socket.AF_INET, target)
        )
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self.connections = 0
        self.blackholed_s = 0.0
        self._since: float | None = None
        threading.Thread(target=self._accept, name="chaos-proxy-accept", daemon=True).start()

    @property
    def silent(self) -> bool:
        """True while the link is blackholed."""
        return not self._flowing.is_set()

    def open_connections(self) -> int:
        """Client connections currently held."""
        with self._lock:
            return len(self._pairs)

    def blackhole(self) -> None:
        """Stop forwarding, in both directions, without closing anything."""
        with self._lock:
            if self._since is None:
                self._since = time.monotonic()
            self._flowing.clear()

    def restore(self) -> None:
        """Forward again (what was held is delivered)."""
        with self._lock:
            if self._since is not None:
                self.blackholed_s += time.monotonic() - self._since
                self._since = None
            self._flowing.set()

    def close(self) -> None:
        """Close the listener and every connection."""
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            _close(*pair)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._flowing.wait()  # a new connection during the blackhole waits too
            server = socket.socket(self._target[0], socket.SOCK_STREAM)
            try:
                server.connect(self._target[1])
            except OSError:
                _close(client, server)  # the server is down: the client sees a refused link
                continue
            pair = (client, server)
            with self._lock:
                self._pairs.append(pair)
                self.connections += 1
            for source, sink in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink, pair), name="chaos-proxy", daemon=True
                ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, pair: tuple[socket.socket, socket.socket]
    ) -> None:
        try:
            while True:
                self._flowing.wait()
                data = source.recv(_CHUNK)
                if not data:
                    break
                self._flowing.wait()  # read just before the blackhole: held, not forwarded
                sink.sendall(data)
        except OSError:
            pass
        self._flowing.wait()  # a close is not forwarded during the blackhole either
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        _close(*pair)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
