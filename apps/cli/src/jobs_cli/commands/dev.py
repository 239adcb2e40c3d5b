"""``jobs dev``: the whole system on one machine, in one process tree that Ctrl-C stops.

The process tree::

    jobs dev (this process: supervisor; holds the embedded PostgreSQL handle)
    ├── python -m jobs_cli api     (uvicorn, JOBS_DATABASE_URL = the resolved URL;
    │                               JOBS_DEMO_OVER_HTTP=1: the demo types over HTTP, dev only)
    ├── python -m jobs_cli worker  (JOBS_DEMO_TYPES=1; restarted if it dies, e.g. the crash demo)
    └── postgres                   (embedded only: started by pgserver; stopped when we exit
                                    unless another jobs process still holds it)

The API and the worker are separate processes because the ``crash`` demo type kills its own
worker process, as a native crash would: the API must survive it, and the supervisor starts a new
worker whose sweep puts the crashed job back in the queue.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from jobs_cli import db, process
from jobs_cli.commands.admin import issue, migrate_url
from jobs_cli.errors import CliError, UsageError, redact_url
from jobs_cli.settings import CliSettings, example_handlers_dir

STOP_MARGIN_S = 10.0
"""How long the children get after SIGTERM beyond the worker's own shutdown grace period (it
hands back its running jobs within that period), before they are killed."""

API_READY_TIMEOUT_S = 60.0
WORKER_RESTARTS_PER_MINUTE = 5
DEMO_TYPES = "noop, sleep, fail, crash"

DEV_DEFAULTS = {
    # The crash demo leaves its job running with no worker; the production default (600 s)
    # would hide the recovery for ten minutes. The user's own values win.
    "JOBS_SWEEP_THRESHOLD_S": "30",
    "JOBS_SWEEP_INTERVAL_S": "5",
    "JOBS_HEARTBEAT_S": "10",  # well within the shorter threshold
    # Ctrl-C should not wait half a minute for a long demo job: after this, the worker hands
    # what still runs back to the queue (no attempt lost) and exits.
    "JOBS_SHUTDOWN_GRACE_S": "10",
    # A few jobs at once, so the demo shows concurrency; the worker's own default is 1.
    "JOBS_CONCURRENCY": "4",
    # The demo org is the operator of this local system: the panel's Overview shows it the
    # live workers, and its token reads /metrics.
    "JOBS_OPERATOR_ORGS": "demo",
}


class _StopRequested(Exception):
    """SIGINT or SIGTERM arrived."""


@contextmanager
def _stop_signals(stop: threading.Event) -> Iterator[None]:
    """Turn SIGINT/SIGTERM/SIGHUP into ``stop`` for the duration (restored afterwards)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGHUP too: closing the terminal should stop the tree as cleanly as Ctrl-C.
    signals = [signal.SIGINT, signal.SIGTERM]
    if hasattr(signal, "SIGHUP"):
        signals.append(signal.SIGHUP)
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _check(stop: threading.Event) -> None:
    if stop.is_set():
        raise _StopRequested


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _env_port() -> int:
    raw = os.environ.get("JOBS_API_PORT", "").strip()
    if not raw:
        return 8000
    try:
        port = int(raw)
    except ValueError:
        raise UsageError(f"JOBS_API_PORT={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise UsageError(f"JOBS_API_PORT={raw!r} is not a port number")
    return port


def _stop_grace_s() -> float:
    raw = os.environ.get("JOBS_SHUTDOWN_GRACE_S") or DEV_DEFAULTS["JOBS_SHUTDOWN_GRACE_S"]
    try:
        grace = float(raw)
    except ValueError:
        grace = float(DEV_DEFAULTS["JOBS_SHUTDOWN_GRACE_S"])  # the worker reports the bad value
    return max(grace, 0.0) + STOP_MARGIN_S


def _client_host(host: str) -> str:
    return "127.0.0.1" if host in {"0.0.0.0", "", "::"} else host


def _wait_ready(
    url: str, api: subprocess.Popen[bytes], stop: threading.Event, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _check(stop)
        if api.poll() is not None:
            raise CliError(f"the API exited with code {api.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        stop.wait(0.2)
    raise CliError(f"the API did not answer {url} within {timeout_s:.0f} s")


def _banner(base: str, token: str, org: str, settings: CliSettings, url: str) -> str:
    database = (
        f"embedded PostgreSQL, data in {settings.data_dir}"
        if settings.database_url is None
        else redact_url(url)
    )
    payload = '{"type": "sleep", "payload": {"seconds": 5}}'
    curl = (
        f"curl -s -X POST {base}/jobs -H 'Authorization: Bearer {token}' "
        f"-H 'Content-Type: application/json' -d '{payload}'"
    )
    demo_env = "" if settings.database_url is None else "JOBS_DEMO_TYPES=1 "
    return "\n".join(
        [
            "",
            "jobs dev is running",
            f"  database  {database}",
            f"  panel     {base}/  (sign in with the token below)",
            f"  API       {base}  (docs: {base}/docs)",
            f"  worker    demo types: {DEMO_TYPES}",
            f"  handlers  {dev_handlers_dir(settings) or 'none (JOBS_HANDLERS_DIR)'}",
            f"  org       {org}",
            "",
            "Try it:",
            f"  {curl}",
            f"  curl -s {base}/jobs -H 'Authorization: Bearer {token}'",
            f"  {demo_env}uv run jobs enqueue sleep --org {org} --payload '{{\"seconds\": 5}}'",
            f"  uv run jobs ls --org {org}",
            "",
            "Press Ctrl-C to stop.",
            f"token: {token}",
        ]
    )


def dev_handlers_dir(settings: CliSettings) -> Path | None:
    """``JOBS_HANDLERS_DIR``, else the project's example handlers (``jobs dev`` serves them)."""
    return settings.handlers_dir or example_handlers_dir()


def _child_env(settings: CliSettings, url: str) -> dict[str, str]:
    env = dict(os.environ)
    for name, value in DEV_DEFAULTS.items():
        env.setdefault(name, value)
    env["JOBS_DATABASE_URL"] = url
    env["JOBS_DATA_DIR"] = str(settings.data_dir)
    env["JOBS_DEMO_TYPES"] = "1"
    handlers = dev_handlers_dir(settings)
    if handlers is not None:
        env["JOBS_HANDLERS_DIR"] = str(handlers)
    # development only: the demo types (crash included) are enqueueable over HTTP
    env["JOBS_DEMO_OVER_HTTP"] = "1"
    return env


def dev(args: argparse.Namespace, settings: CliSettings) -> int:
    """Run the database, the API and a worker until SIGINT/SIGTERM; exit 0 on a clean stop."""
    # Line-buffered so the banner reaches a pipe (a test, `tee`) as soon as it is printed.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    stop = threading.Event()
    children: list[subprocess.Popen[bytes]] = []
    with _stop_signals(stop):
        try:
            return _run(args, settings, stop, children)
        except _StopRequested:
            return 0
        finally:
            if children:
                print("jobs dev: stopping the API and the worker...", file=sys.stderr, flush=True)
            process.stop(children, _stop_grace_s())
            if settings.database_url is None and db.release_embedded_server(settings):
                print("jobs dev: stopped the embedded PostgreSQL", file=sys.stderr, flush=True)


def _run(
    args: argparse.Namespace,
    settings: CliSettings,
    stop: threading.Event,
    children: list[subprocess.Popen[bytes]],
) -> int:
    host: str = args.host or os.environ.get("JOBS_API_HOST", "").strip() or "127.0.0.1"
    port: int = args.port or _env_port()
    if not _port_free(host, port):
        raise CliError(f"port {port} on {host} is already in use; choose another with --port")

    if settings.database_url is None:
        print(f"starting the embedded PostgreSQL (data in {settings.data_dir})...", flush=True)
    url = db.database_url(settings)
    _check(stop)
    migrate_url(url, settings)
    _check(stop)

    # The resolved URL, so the embedded server is not looked up twice.
    with db.engine(dataclasses.replace(settings, database_url=url)) as engine:
        token, _ = issue(engine, args.org, "jobs dev")
    _check(stop)

    env = _child_env(settings, url)
    me = [sys.executable, "-m", "jobs_cli"]
    api_argv = [*me, "api", "--host", host, "--port", str(port)]
    worker_argv = [*me, "worker"]
    if args.concurrency is not None:
        worker_argv += ["--concurrency", str(args.concurrency)]

    children.append(process.spawn(api_argv, env))
    worker = process.spawn(worker_argv, env)
    children.append(worker)

    base = f"http://{_client_host(host)}:{port}"
    _wait_ready(f"{base}/healthz", children[0], stop, API_READY_TIMEOUT_S)
    print(_banner(base, token, args.org, settings, url), flush=True)

    restarts: list[float] = []
    while not stop.wait(0.25):
        api = children[0]
        if api.poll() is not None:
            raise CliError(f"the API exited with code {api.returncode}; stopping")
        if worker.poll() is not None:
            now = time.monotonic()
            restarts = [t for t in restarts if now - t < 60] + [now]
            if len(restarts) > WORKER_RESTARTS_PER_MINUTE:
                raise CliError(
                    f"the worker died {len(restarts)} times within a minute "
                    f"(last exit code {worker.returncode}); stopping"
                )
            print(
                f"jobs dev: the worker exited with code {worker.returncode}; starting a new one "
                f"({shlex.join(worker_argv[2:])})",
                file=sys.stderr,
                flush=True,
            )
            worker = process.spawn(worker_argv, env)
            children[1] = worker
    return 0
