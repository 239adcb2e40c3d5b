"""Bounded waits for the worker's connections: no store call may block longer than a deadline.

A worker must be able to tell, within a known time, that it cannot reach the database (the lease
argument of docs/worker.md). PostgreSQL and libpq bound most waits, once told to:

- ``statement_timeout`` and ``lock_timeout`` (per session): a statement the server runs too
  long, or one waiting for a lock, is cancelled by the server (SQLSTATE 57014 / 55P03: an
  outage for :mod:`jobs_postgres.errors`);
- ``connect_timeout``: a connection that cannot be opened;
- TCP keepalives and ``tcp_user_timeout``: a peer that vanished (packets dropped, the
  connection never closed) is detected by the kernel and the socket fails.

None of them covers a link that stays up at the TCP level while nothing comes back (a proxy or
a load balancer that stopped forwarding, a frozen server process): the kernel keeps answering,
the client waits for a reply forever. :func:`abort_stuck_calls` closes that gap: a connection
checked out of the pool longer than the deadline has its socket shut down from a watchdog
thread, so the blocked call fails at once as a lost connection (``StoreUnavailable``) and the
pool opens a new one. The worker's statements are all short (claim, finish, heartbeat: one
indexed statement each), so the deadline is far above any healthy call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import weakref
from typing import Any

import psycopg
import sqlalchemy
from sqlalchemy import event
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

log = logging.getLogger("jobs.postgres")


def bounded_connect_args(call_timeout_s: float) -> dict[str, Any]:
    """libpq parameters that bound a connection's waits to about ``call_timeout_s``.

    Keepalives start after ``call_timeout_s`` of silence (at least 1 s), probe every third of
    it, and give up after 3 probes; ``tcp_user_timeout`` fails a socket whose sent data stays
    unacknowledged that long. libpq ignores both on a unix socket (the embedded server), where
    there is no network to lose.
    """
    idle = max(1, round(call_timeout_s))
    return {
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": max(1, round(call_timeout_s / 3)),
        "keepalives_count": 3,
        "tcp_user_timeout": max(1000, round(call_timeout_s * 1000)),
    }


def bounded_session_settings(call_timeout_s: float) -> dict[str, str]:
    """``statement_timeout`` and ``lock_timeout`` (a session's waits) for ``call_timeout_s``:
    the lock wait is bounded to half of it, so a statement blocked by a lock fails with a
    clear "lock timeout" before its statement timeout."""
    millis = max(1, round(call_timeout_s * 1000))
    return {"statement_timeout": f"{millis}ms", "lock_timeout": f"{max(1, millis // 2)}ms"}


class _Watchdog:
    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self.lock = threading.Lock()
        self.out: dict[int, tuple[float, Any]] = {}  # id(dbapi connection) -> (since, conn)
        self.aborted = 0

    def scan(self) -> None:
        now = time.monotonic()
        with self.lock:
            stuck = [conn for since, conn in self.out.values() if now - since > self.after_s]
        for conn in stuck:
            if _shut_down(conn):
                self.aborted += 1
                log.warning(
                    "aborted a database call stuck for more than %.1f s (no reply: the link to"
                    " the server is silent); the pool opens a new connection",
                    self.after_s,
                )


_WATCHDOGS: weakref.WeakKeyDictionary[sqlalchemy.Engine, _Watchdog] = weakref.WeakKeyDictionary()


def aborted_calls(engine: sqlalchemy.Engine) -> int:
    """How many stuck calls of ``engine`` :func:`abort_stuck_calls` has aborted so far."""
    watchdog = _WATCHDOGS.get(engine)
    return 0 if watchdog is None else watchdog.aborted


def abort_stuck_calls(engine: sqlalchemy.Engine, after_s: float) -> None:
    """Shut down the socket of any connection of ``engine`` checked out longer than
    ``after_s`` seconds (see the module's docstring); a daemon thread checks 4 times per
    ``after_s`` (at least every 0.05 s, at most every second) while the engine lives."""
    watchdog = _Watchdog(after_s)

    @event.listens_for(engine, "checkout", insert=True)  # before the checkout ping, if any
    def _out(dbapi_connection: Any, record: ConnectionPoolEntry, _: PoolProxiedConnection) -> None:
        with watchdog.lock:
            watchdog.out[id(dbapi_connection)] = (time.monotonic(), dbapi_connection)

    @event.listens_for(engine, "checkin")
    def _in(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        with watchdog.lock:
            watchdog.out.pop(id(dbapi_connection), None)

    @event.listens_for(engine, "invalidate")
    def _gone(dbapi_connection: Any, record: ConnectionPoolEntry, _: object) -> None:
        with watchdog.lock:
            watchdog.out.pop(id(dbapi_connection), None)

    alive = weakref.ref(engine)
    period = min(1.0, max(0.05, after_s / 4))

    def run() -> None:
        while alive() is not None:
            time.sleep(period)
            watchdog.scan()

    _WATCHDOGS[engine] = watchdog
    threading.Thread(target=run, name="jobs-db-watchdog", daemon=True).start()


def _shut_down(conn: Any) -> bool:
    """Shut the socket of a psycopg connection down (both ways): a call blocked on it returns
    at once with "server closed the connection"."""
    if not isinstance(conn, psycopg.Connection) or conn.closed:
        return False
    try:
        fd = os.dup(conn.pgconn.socket)
    except (OSError, psycopg.OperationalError):
        return False
    with contextlib.closing(socket.socket(fileno=fd)) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
        return True
    return False
