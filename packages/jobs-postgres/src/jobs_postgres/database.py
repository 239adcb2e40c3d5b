"""The engines on a database: SQLAlchemy with the psycopg 3 driver, its pool, the sessions'
settings, the check of a pooled connection at checkout.

Which server and through what (the URL, the embedded server, the pooler mode, a session's
startup settings) is :mod:`jobs_postgres.connect`, which needs no SQLAlchemy (decision 0049);
its names are exported here too.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Mapping
from typing import Any

import psycopg
import sqlalchemy
from psycopg import sql
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import ConnectionPoolEntry, NullPool, PoolProxiedConnection

from jobs_postgres.connect import (
    CONNECT_TIMEOUT_S,
    EMBEDDED_DATABASE,
    POOLER_ENV,
    POOLER_MODES,
    SESSION_ONLY_SETTINGS,
    libpq_url,
    pooler_mode,
    resolve_database_url,
    session_settings_left_out,
    startup_connect_args,
)

__all__ = [
    "EMBEDDED_DATABASE",
    "KEPT_PLAN_SETTINGS",
    "PING_IDLE_AFTER_S",
    "POOLER_ENV",
    "POOLER_MODES",
    "SESSION_ONLY_SETTINGS",
    "STORE_SESSION_SETTINGS",
    "WORKER_SESSION_SETTINGS",
    "check_on_checkout",
    "create_engine",
    "create_unpooled_engine",
    "drop_database",
    "ensure_database",
    "libpq_url",
    "pooler_mode",
    "read_timestamps_as_utc",
    "resolve_database_url",
    "session_settings_left_out",
    "sqlalchemy_url",
    "startup_connect_args",
    "with_database",
]

log = logging.getLogger("jobs.postgres")


def sqlalchemy_url(url: str) -> URL:
    """``url`` for SQLAlchemy with the psycopg 3 driver (``postgresql://`` is accepted).

    Raises ``ValueError`` for a URL that does not name a PostgreSQL server (:func:`libpq_url`).
    """
    try:
        parsed = make_url(libpq_url(url))
    except sqlalchemy.exc.ArgumentError as error:
        raise ValueError(f"not a database URL: {url!r}") from error
    return parsed.set(drivername="postgresql+psycopg")


WORKER_SESSION_SETTINGS: Mapping[str, str] = {"enable_bitmapscan": "off"}
"""Planner settings of the worker's sessions (``create_engine(session_settings=...)``).

The claim must walk ``jobs_queue_idx`` in order and stop after ``limit`` rows. On a table the
planner has not analyzed yet (a new deployment's first minute, any freshly filled table) it
estimates one queued row and picks a bitmap scan of *every* queued row plus a sort: 8-14 ms a
claim at 10,000 queued jobs instead of 0.1 ms (bench/NOTES.md §2). Every statement a worker runs
is a primary-key probe or an ordered walk of ``jobs_queue_idx``, none gains from a bitmap scan;
the API and the CLI keep the default planner (their lists may want one)."""


STORE_SESSION_SETTINGS: Mapping[str, str] = {
    **WORKER_SESSION_SETTINGS,
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
}
"""Planner settings of the sessions of the worker's job store (the claim, the finish, the
heartbeat: the statements a worker runs for every job).

psycopg prepares a statement on the server from its fifth execution; PostgreSQL then still
plans it again for every execution's values (a custom plan) whenever it estimates that plan
cheaper than a generic one, which it did for the claim and the finish: planning was ~40 % of
their round trip (0.45 of 1.15 ms for the finish-and-claim of one job at c1; bench/NOTES.md
§9). Forced generic, each session plans a statement once and reuses the plan. The generic
plans of these statements are the same index walks and primary-key probes as the custom ones
(tests/postgres/test_claim_plan.py reads both, on a table never analyzed and on a million
rows); they are rebuilt when the table is analyzed. Only the store's sessions use it: a
statement whose best plan depends on its values (the purge's batched delete, a module's own
queries) keeps a custom plan on the worker's other engine.

A plan kept that long must be right for the table as it will be, not as it was: made when
``job_attempts`` (or ``jobs``) had just been analyzed empty, the cheapest plan *then* numbers
each attempt by a sequential scan of the whole history, and the session would run it for every
finished job from then on (a drain of 20,000 jobs fell from ~2,800 to ~1,000 jobs/s). So the
store's sessions also refuse sequential scans (``enable_seqscan = off`` only penalises them: a
statement with no index to use still scans); every statement they run has a key or an ordered
index to walk (tests/postgres/test_claim_plan.py)."""


KEPT_PLAN_SETTINGS = frozenset({"plan_cache_mode", "enable_seqscan"})
"""The settings of ``STORE_SESSION_SETTINGS`` that only matter to a plan a session keeps: behind a
pooler in transaction mode no statement is prepared, so none is kept and the role needs neither."""


def read_timestamps_as_utc(engine: sqlalchemy.Engine) -> None:
    """Every ``timestamptz`` the connections of ``engine`` read comes back in UTC, whatever the
    session's ``timezone`` (through a pooler, the server's or the role's, not ours)."""
    from jobs_postgres.pooler import register_utc_loaders

    @event.listens_for(engine, "connect")
    def _connected(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        if isinstance(dbapi_connection, psycopg.Connection):
            register_utc_loaders(dbapi_connection)


PING_IDLE_AFTER_S = 5.0
"""A pooled connection idle longer than this is pinged (one round trip) before it is used."""


def create_engine(
    url: str,
    *,
    session_settings: Mapping[str, str] | None = None,
    check_connections: bool = True,
    pooler: str | None = None,
    **options: Any,
) -> sqlalchemy.Engine:
    """A SQLAlchemy engine on ``url`` with the psycopg 3 driver.

    - ``check_connections``: a pooled connection the server dropped (restart, failover,
      ``pg_terminate_backend``) is replaced at checkout instead of failing the next call, so a
      server restart between two calls loses nothing. The check costs no round trip on a
      connection in use: see :func:`check_on_checkout` (it replaces ``pool_pre_ping``, which
      paid one ``SELECT 1`` round trip per checkout: 30 % of an enqueue, bench/NOTES.md §4);
    - every session runs in UTC, so timestamps come back as UTC datetimes;
    - ``session_settings``: more settings every session starts with (``SET name = value``,
      sent once at connect time, e.g. :data:`WORKER_SESSION_SETTINGS`);
    - behind a pooler in transaction mode (``pooler``, else ``JOBS_DATABASE_POOLER``:
      ``transaction``), no session setting is sent and no statement prepared
      (:func:`startup_connect_args`);
    - the pool hands out its most recently returned connection first (``pool_use_lifo``): a
      connection FIFO order would hand out has often sat idle past the ping threshold;
    - ``options`` override the defaults (e.g. ``pool_size``; ``pool_pre_ping=True`` still
      pings on every checkout).
    """
    pooler = pooler_mode() if pooler is None else pooler
    settings: dict[str, Any] = {
        "pool_size": 10,
        "max_overflow": 20,
        "pool_timeout": 10,
        "pool_recycle": 1800,
        # The most recently returned connection first: it is warm and was in use a moment ago,
        # so the checkout check below rarely pings; idle ones stay idle (and can be recycled).
        "pool_use_lifo": True,
        "connect_args": {
            **startup_connect_args(session_settings or {}, pooler),
            "connect_timeout": CONNECT_TIMEOUT_S,
        },
    }
    settings.update(options)
    engine = sqlalchemy.create_engine(sqlalchemy_url(url), **settings)
    if pooler != "none":
        read_timestamps_as_utc(engine)
    if check_connections:
        check_on_checkout(engine)
    return engine


def check_on_checkout(engine: sqlalchemy.Engine, idle_after_s: float = PING_IDLE_AFTER_S) -> None:
    """Replace, at checkout, the pooled connections of ``engine`` the server has dropped.

    A server that ends a session (restart, ``pg_terminate_backend``, idle timeout) writes a
    FATAL message and closes the socket: a pooled connection then has something to read while
    it should have nothing. So at checkout the socket is polled (a system call, no round
    trip); a readable socket, or a connection idle longer than ``idle_after_s`` (a peer that
    vanished without a word, e.g. a failover to another host), is pinged, and a failed ping
    replaces it — and every connection pooled before it (``InvalidatePoolError``) — with a
    fresh one. A connection returned to the pool recently, with nothing to read, is used as
    is: if it dies in that instant, the call raises ``StoreUnavailable`` (reads and single
    enqueues are retried once by the store, see ``PostgresJobStore``).
    """
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["jobs_checked_in"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(
        dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
    ) -> None:
        checked_in = record.info.get("jobs_checked_in")
        if checked_in is None:  # fresh from connect
            return
        if not _has_input(dbapi_connection) and time.monotonic() - checked_in < idle_after_s:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as error:  # any failure means: not usable
            raise exc.InvalidatePoolError(f"pooled connection lost: {error}") from error


def _has_input(dbapi_connection: Any) -> bool:
    """True if the idle connection's socket has something to read (or is closed)."""
    if not isinstance(dbapi_connection, psycopg.Connection):
        return True  # not ours to poll: ping it
    pgconn = dbapi_connection.pgconn
    if pgconn.status != psycopg.pq.ConnStatus.OK:
        return True
    try:
        fd = pgconn.socket
        if hasattr(select, "poll"):  # no FD_SETSIZE limit
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return bool(readable)


def create_unpooled_engine(url: str, pooler: str | None = None) -> sqlalchemy.Engine:
    """An engine whose connections close when released, for one-off work (migrations)."""
    pooler = pooler_mode() if pooler is None else pooler
    engine = sqlalchemy.create_engine(
        sqlalchemy_url(url),
        poolclass=NullPool,
        connect_args={**startup_connect_args({}, pooler), "connect_timeout": CONNECT_TIMEOUT_S},
    )
    if pooler != "none":
        read_timestamps_as_utc(engine)
    return engine


def ensure_database(admin_url: str, name: str) -> bool:
    """Create database ``name`` on the server of ``admin_url`` unless it exists; True if made."""
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return False
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            return False  # another process created it between the check and now
        log.info("created database %s", name)
        return True


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name`` (closing its connections) if it exists."""
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` of the same server (same driver prefix)."""
    return make_url(url).set(database=name).render_as_string(hide_password=False)
