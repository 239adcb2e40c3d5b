"""The chaos suite's blackhole proxy on real sockets: silent without closing, then healed with
nothing lost; a connection opened during the silence waits too."""

from __future__ import annotations

import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos.proxy import BlackholeProxy


@pytest.fixture
def echo_socket() -> Iterator[str]:
    """A unix-socket echo server (what the proxy forwards to)."""
    with tempfile.TemporaryDirectory(prefix="chaos-proxy-test-") as tmp:
        path = str(Path(tmp) / "echo.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen()

        def serve(conn: socket.socket) -> None:
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

        def accept() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        yield path
        server.close()


def _client(port: int) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=5)
    client.settimeout(5)
    return client


def test_a_blackholed_link_neither_answers_nor_closes_and_delivers_everything_once_healed(
    echo_socket: str,
) -> None:
    proxy = BlackholeProxy(echo_socket)
    try:
        client = _client(proxy.port)
        client.sendall(b"before")
        assert client.recv(100) == b"before"
        proxy.blackhole()
        assert proxy.silent
        client.sendall(b"during")
        client.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.recv(100)  # no answer, and no close (a close would return b"")
        late = _client(proxy.port)  # the handshake completes: the peer looks alive
        late.sendall(b"late")
        late.settimeout(0.5)
        with pytest.raises(TimeoutError):
            late.recv(100)
        proxy.restore()
        client.settimeout(5)
        late.settimeout(5)
        assert client.recv(100) == b"during"
        assert late.recv(100) == b"late"
        assert proxy.blackholed_s >= 0.9
        assert proxy.connections == 2
        client.close()
        late.close()
    finally:
        proxy.close()


def test_a_closed_server_side_closes_the_client_side(echo_socket: str) -> None:
    proxy = BlackholeProxy(str(Path(echo_socket).with_name("nobody-listens.sock")))
    try:
        client = _client(proxy.port)
        assert client.recv(100) == b""  # refused upstream: the client sees the link close
    finally:
        proxy.close()
