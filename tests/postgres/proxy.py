"""TCP proxies between a test and the PostgreSQL server: one that loses one connection on
purpose (what a network cut or a server crash does to a client, at a chosen message), and one
whose link goes silent without closing (blackholed or frozen) and comes back."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Any

from sqlalchemy import make_url


class CuttingProxy:
    """A TCP proxy to the test server that cuts, once, the connection carrying ``marker``:
    before the server sees that message, or (``after_reply``) once the server has answered it
    in full (ReadyForQuery: a statement in autocommit has committed) without passing the
    answer on. Every other connection and message goes through untouched."""

    def __init__(self, pg_url: str, marker: bytes, *, after_reply: bool) -> None:
        target = make_url(pg_url)
        host = target.query.get("host") or target.host or "127.0.0.1"
        port = target.port or 5432
        self._target: tuple[int, Any] = (
            (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}")
            if str(host).startswith("/")
            else (socket.AF_INET, (host, port))
        )
        self._marker = marker
        self._after_reply = after_reply
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = (
            target.set(host="127.0.0.1", port=self._listener.getsockname()[1], query={})
        ).render_as_string(hide_password=False)
        self.cut = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._listener.accept()
                server = socket.socket(self._target[0], socket.SOCK_STREAM)
                server.connect(self._target[1])
                self._sockets += [client, server]
                dropping = threading.Event()
                threading.Thread(
                    target=self._upstream, args=(client, server, dropping), daemon=True
                ).start()
                threading.Thread(
                    target=self._downstream, args=(server, client, dropping), daemon=True
                ).start()

    def _upstream(
        self, client: socket.socket, server: socket.socket, drop: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if self._marker in data and not self.cut.is_set():
                    self.cut.set()
                    if not self._after_reply:
                        break  # the server never sees it
                    drop.set()
                server.sendall(data)
        if not drop.is_set():
            _close(client, server)

    def _downstream(
        self, server: socket.socket, client: socket.socket, drop: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if drop.is_set():
                    if b"Z\x00\x00\x00\x05" in data:  # ReadyForQuery: answered in full
                        break
                    continue
                client.sendall(data)
        _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


class LinkProxy:
    """A TCP proxy to the test server whose link can go silent without closing anything:

    - :meth:`blackhole`: bytes in both directions are read and thrown away (what a peer gets
      from a network that drops its packets, minus TCP's retransmissions: a stream whose bytes
      were lost never recovers, its calls must be abandoned);
    - :meth:`freeze`: nothing is read any more; the bytes wait in the kernel's buffers and flow
      again on :meth:`restore` (a network that stopped delivering, then recovered, with TCP
      retransmitting what was held);
    - :meth:`sever`: every connection closed, each new one closed at once (a server down);
    - :meth:`restore`: forward again, existing and new connections alike.

    In both silent modes new connections are accepted (the kernel completes the handshake) but
    nothing of them reaches the server, and no socket is ever closed by the proxy: the client's
    kernel sees a healthy peer, so only the client's own deadlines can notice.
    """

    PASS, DROP, HOLD, SEVER = "pass", "drop", "hold", "sever"

    def __init__(self, pg_url: str) -> None:
        target = make_url(pg_url)
        host = target.query.get("host") or target.host or "127.0.0.1"
        port = target.port or 5432
        self._target: tuple[int, Any] = (
            (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}")
            if str(host).startswith("/")
            else (socket.AF_INET, (host, port))
        )
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = (
            target.set(host="127.0.0.1", port=self._listener.getsockname()[1], query={})
        ).render_as_string(hide_password=False)
        self._mode = self.PASS
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        self.dropped_bytes = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def blackhole(self) -> None:
        self._mode = self.DROP
        self._flowing.set()

    def freeze(self) -> None:
        self._mode = self.HOLD
        self._flowing.clear()

    def sever(self) -> None:
        """Close every connection and each new one at once (a server down: refused at once)."""
        self._mode = self.SEVER
        self._flowing.set()
        for sock in self._sockets[1:]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._sockets[1:] = []

    def restore(self) -> None:
        self._mode = self.PASS
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while not self._closed.is_set():
                client, _ = self._listener.accept()
                if self._mode == self.SEVER:
                    client.close()
                    continue
                server = socket.socket(self._target[0], socket.SOCK_STREAM)
                server.connect(self._target[1])
                self._sockets += [client, server]
                for source, sink in ((client, server), (server, client)):
                    threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError):
            while not self._closed.is_set():
                if not self._flowing.wait(0.1):
                    continue  # frozen: read nothing, the bytes wait in the kernel
                readable, _, _ = select.select([source], [], [], 0.1)
                if not readable:
                    continue
                if self._mode == self.HOLD:
                    continue
                data = source.recv(65536)
                if not data:
                    break
                if self._mode == self.DROP:
                    self.dropped_bytes += len(data)
                    continue
                sink.sendall(data)
        if not self._closed.is_set():
            _close(source, sink)
