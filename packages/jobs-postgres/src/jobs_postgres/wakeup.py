"""LISTEN/NOTIFY wake-ups: an idle worker starts a new job within milliseconds of its enqueue.

Every statement of the store that makes work available sends ``NOTIFY jobs_new`` in its
transaction (:mod:`jobs_postgres.sql`). :class:`PostgresWakeup` holds one dedicated connection
that LISTENs on that channel from a background thread. A notification can still be missed (the
listener reconnecting, a NOTIFY lost with a crashed server), so the worker keeps polling with a
timeout as the fallback: this only makes the wait shorter.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import psycopg
from psycopg import sql as pgsql

from jobs_postgres.database import libpq_url
from jobs_postgres.deadlines import bounded_connect_args
from jobs_postgres.sql import NEW_WORK_CHANNEL

log = logging.getLogger("jobs.postgres.wakeup")

_POLL_S = 0.2
"""How often the listener thread checks that it was asked to stop."""

_RECONNECT_MAX_S = 2.0


class PostgresWakeup:
    """A :class:`jobs_core.ports.Wakeup` fed by ``LISTEN jobs_new`` on a dedicated connection.

    The constructor connects and LISTENs before returning (an enqueue committed after it wakes
    the next :meth:`wait`). If the server cannot be reached, the listener keeps reconnecting in
    the background, with a capped backoff; after a reconnection :meth:`wait` reports a wake-up,
    since notifications may have been missed meanwhile and the worker should poll.
    """

    def __init__(self, url: str, channel: str = NEW_WORK_CHANNEL) -> None:
        self._conninfo = libpq_url(url)
        self._channel = channel
        self._changed = threading.Condition()
        self._generation = 0
        self._seen = 0
        self._stopping = threading.Event()
        self._connected = threading.Event()
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        try:
            self._conn = self._connect()
        except psycopg.Error as error:
            log.warning("cannot listen for new jobs yet (%s); retrying in the background", error)
        self._thread = threading.Thread(target=self._run, name="jobs-wakeup", daemon=True)
        self._thread.start()

    @property
    def connected(self) -> bool:
        """True while the listening connection is up."""
        return self._connected.is_set()

    def wait(self, timeout: float) -> bool:
        """Block until a notification (or a reconnection) or ``timeout`` seconds; True if woken.

        Notifications that arrived since the previous call count: the worker was busy and new
        work is waiting, so it returns at once.
        """
        with self._changed:
            if self._stopping.is_set():
                return False
            self._changed.wait_for(
                lambda: self._generation != self._seen or self._stopping.is_set(), timeout
            )
            woken = self._generation != self._seen
            self._seen = self._generation
            return woken

    def close(self) -> None:
        """Stop listening, close the connection and wake any waiter (which returns False)."""
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        self._thread.join(timeout=5)

    # -- the listener thread ----------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        # TCP keepalives and a user timeout: a listener on a silently dropped network learns
        # it within a minute (jobs_postgres.deadlines).
        conn = psycopg.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=5,
            **{**bounded_connect_args(20.0), "keepalives_interval": 5, "keepalives_count": 4},
        )
        try:
            conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(self._channel)))
        except BaseException:
            conn.close()
            raise
        self._connected.set()
        return conn

    def _wake(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _run(self) -> None:
        delay = 0.05
        try:
            while not self._stopping.is_set():
                if self._conn is None:
                    try:
                        self._conn = self._connect()
                    except psycopg.Error as error:
                        log.debug("listener reconnect failed: %s", error)
                        self._stopping.wait(delay)
                        delay = min(delay * 2, _RECONNECT_MAX_S)
                        continue
                    delay = 0.05
                    log.info("listening for new jobs again")
                    self._wake()  # notifications may have been missed: let the worker poll
                try:
                    for _ in self._conn.notifies(timeout=_POLL_S):
                        self._wake()
                        if self._stopping.is_set():
                            break
                except psycopg.Error as error:
                    log.warning("lost the listening connection (%s); reconnecting", error)
                    self._connected.clear()
                    self._close_connection()
        finally:
            self._connected.clear()
            self._close_connection()

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):  # closing a broken connection
                conn.close()


class PollingWakeup:
    """A :class:`jobs_core.ports.Wakeup` that is never signalled: the worker finds new work by
    its poll (every ``JOBS_POLL_INTERVAL_S``), so a job waits up to that long for an idle
    worker. What a worker behind a pooler in transaction mode gets without
    ``JOBS_DIRECT_DATABASE_URL``: ``LISTEN`` needs a session, which such a pooler does not keep.
    """

    _told = False

    def __init__(self) -> None:
        self._closed = threading.Event()

    @classmethod
    def stated(cls, poll_interval_s: float) -> PollingWakeup:
        """A new one, and (once per process) the log line saying what it costs."""
        if not cls._told:
            cls._told = True
            log.warning(
                "JOBS_DATABASE_POOLER=transaction without JOBS_DIRECT_DATABASE_URL: no LISTEN"
                " for new jobs, the worker polls every %g s (JOBS_POLL_INTERVAL_S): an idle"
                " worker starts a new job up to that long after its enqueue",
                poll_interval_s,
            )
        return cls()

    def wait(self, timeout: float) -> bool:
        """Sleep ``timeout`` seconds (or until :meth:`close`); never woken by a signal."""
        self._closed.wait(timeout)
        return False

    def close(self) -> None:
        """Wake a waiter, which returns False."""
        self._closed.set()
