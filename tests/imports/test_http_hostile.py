"""Hostile requests against the real deployable: ``jobs api`` (uvicorn, the Imports module, on
PostgreSQL) in a process of its own, spoken to over real sockets (issue 11, findings 3 and 5).

- An upload without a live token is answered 401 before its body is read: the client sends the
  headers and a few kilobytes of a body it declares to be 200 MB, and gets its answer at once,
  with ``Connection: close``; nothing was written to disk (the server's temporary directory and
  its data directory stay empty).
- Every refusal of bad input is a 4xx, and the keep-alive connection stays usable after each:
  all of them go over one socket.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import SystemClock
from jobs_tokens import issue_token

from tests.cli.helpers import free_port

if TYPE_CHECKING:
    from sqlalchemy import Engine

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60
ANSWER_TIMEOUT_S = 20
pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@dataclass
class Server:
    """A running ``jobs api`` and the directories it may write to."""

    host: str
    port: int
    data_dir: Path
    tmp_dir: Path
    token: str

    def files(self) -> list[Path]:
        """Every file under the server's data and temporary directories."""
        return [
            path
            for root in (self.data_dir, self.tmp_dir)
            for path in root.rglob("*")
            if path.is_file()
        ]


@pytest.fixture
def server(imports_url: str, imports_engine: Engine) -> Iterator[Server]:
    """``python -m jobs_cli api`` on a free port of the test database, with the demo types served
    over HTTP (the development flag), its own data directory and its own ``TMPDIR``."""
    from jobs_postgres.tokens import PostgresTokenStore

    token, _ = issue_token(
        PostgresTokenStore(imports_engine), "org-http", None, SystemClock().now()
    )
    with (
        tempfile.TemporaryDirectory(prefix="jobs-http-data-") as data_dir,
        tempfile.TemporaryDirectory(prefix="jobs-http-tmp-") as tmp_dir,
    ):
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "JOBS_DATABASE_URL": imports_url,
            "JOBS_DATA_DIR": data_dir,
            "TMPDIR": tmp_dir,
            "JOBS_DEMO_TYPES": "1",
            "JOBS_DEMO_OVER_HTTP": "1",
            "JOBS_API_TOKEN_CACHE_S": "0",
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "jobs_cli", "api", "--port", str(free_port())],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        log: list[str] = []

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                log.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            while True:
                line = lines.get(timeout=STARTUP_TIMEOUT_S)
                assert line is not None, "jobs api exited at startup:\n" + "".join(log)
                match = re.search(r"Uvicorn running on http://([\d.]+):(\d+)", line)
                if match:
                    break
            yield Server(match.group(1), int(match.group(2)), Path(data_dir), Path(tmp_dir), token)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        assert not any("Traceback" in line for line in log), "".join(log)


def _head_of_answer(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """Read a response's status line and headers from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(head[0].split()[1]), headers


@pytest.mark.parametrize("authorization", [None, "Bearer jobs_" + "A" * 43], ids=["none", "bad"])
def test_an_upload_without_a_live_token_is_answered_before_its_body_is_sent(
    server: Server, authorization: str | None
) -> None:
    declared = 200 * 1024 * 1024
    part = (
        b"--b0undary\r\n"
        b'Content-Disposition: form-data; name="file"; filename="export.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\n" + b"url,clicks\n" + b"https://e.com/,1\n" * 4000
    )  # ~70 KB of the 200 MB announced
    head = (
        "POST /imports/csv HTTP/1.1\r\n"
        f"Host: {server.host}\r\n"
        "Content-Type: multipart/form-data; boundary=b0undary\r\n"
        f"Content-Length: {declared}\r\n"
        + (f"Authorization: {authorization}\r\n" if authorization else "")
        + "\r\n"
    )
    with socket.create_connection((server.host, server.port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(head.encode() + part)
        # The rest of the body is never sent: a server that reads the body before it checks
        # the token waits here for the other 199.9 MB, and the read times out.
        status, headers = _head_of_answer(sock)
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/problem+json"
    assert server.files() == []


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_bad_input_is_refused_with_a_4xx_and_the_connection_stays_usable(
    server: Server,
) -> None:
    auth = {"Authorization": f"Bearer {server.token}"}
    connection = http.client.HTTPConnection(server.host, server.port, timeout=ANSWER_TIMEOUT_S)
    answers: list[tuple[str, int]] = []
    first_socket: Any = None

    def call(label: str, method: str, path: str, body: bytes | None, **headers: str) -> Any:
        nonlocal first_socket
        connection.request(method, path, body=body, headers={**auth, **headers})
        response = connection.getresponse()
        payload = response.read()
        if first_socket is None:
            first_socket = connection.sock
        assert connection.sock is first_socket, f"{label}: the server closed the connection"
        assert response.getheader("connection") != "close", label
        answers.append((label, response.status))
        return json.loads(payload) if payload else None

    as_json = {"Content-Type": "application/json"}
    for label, number in (
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("1e999", "1e999"),
    ):
        body = f'{{"type": "noop", "payload": {{"x": {number}}}}}'.encode()
        problem = call(label, "POST", "/jobs", body, **as_json)
        assert problem["errors"][0]["loc"] == ["body", "payload", "x"], label
    problem = call(
        "nested",
        "POST",
        "/jobs",
        b'{"type": "noop", "payload": {"x": ' + _deep(300).encode() + b"}}",
        **as_json,
    )
    assert problem["errors"][0]["type"] == "too_deep"
    problem = call(
        "surrogate", "POST", "/jobs", b'{"type": "noop", "payload": {"x": "\\ud800"}}', **as_json
    )
    assert problem["errors"][0]["loc"] == ["body", "payload", "x"]
    call(
        "nul name",
        "POST",
        "/site-targets",
        b'{"name": "a\\u0000b", "base_url": "example.com"}',
        **as_json,
    )
    call(
        "surrogate name",
        "POST",
        "/site-targets",
        b'{"name": "a\\udfffb", "base_url": "example.com"}',
        **as_json,
    )
    call(
        "loopback",
        "POST",
        "/site-targets",
        b'{"name": "x", "base_url": "http://2130706433/"}',
        **as_json,
    )
    target = call(
        "target",
        "POST",
        "/site-targets",
        b'{"name": "ok", "base_url": "www.example.com"}',
        **as_json,
    )
    noise = "".join(f"{n:04x}" for n in range(2000))
    pages = json.dumps({"urls": [f"https://www.example.com/{noise}"]}).encode()
    added = call("8000-char page", "POST", f"/site-targets/{target['id']}/pages", pages, **as_json)
    assert added["invalid"] == 1
    upload = (
        b"--b0undary\r\n"
        b'Content-Disposition: form-data; name="site_target_id"\r\n\r\n'
        + target["id"].encode()
        + b"\r\n--b0undary\r\n"
        b'Content-Disposition: form-data; name="file"; filename="a\x00b.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\nurl\nhttps://www.example.com/\r\n--b0undary--\r\n"
    )
    call(
        "nul file name",
        "POST",
        "/imports/csv",
        upload,
        **{"Content-Type": "multipart/form-data; boundary=b0undary"},
    )
    call("malformed id", "GET", "/jobs/not-a-uuid", None)
    call("health", "GET", "/healthz", None)
    connection.close()

    expected = {
        "NaN": 422,
        "Infinity": 422,
        "-Infinity": 422,
        "1e999": 422,
        "nested": 422,
        "surrogate": 422,
        "nul name": 422,
        "surrogate name": 422,
        "loopback": 422,
        "target": 201,
        "8000-char page": 200,
        "nul file name": 422,
        "malformed id": 404,
        "health": 200,
    }
    assert dict(answers) == expected
    assert not list((server.data_dir / "imports").rglob("*.csv"))  # the refused file: never stored
