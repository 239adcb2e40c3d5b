"""Fixtures for the tests through PgBouncer and against a streaming standby (decision 0040),
loaded by the root conftest.

- ``pgbouncer``: a private PgBouncer in transaction pooling mode in front of the session's
  server, on a port of 5440-5449 (``bench.cluster.Bouncer``), stopped at the end of the session;
  the tests that use it are skipped, with the reason, where pgbouncer is not installed.
- ``pooled_url``: a migrated database of its own through that pooler. Its default ``timezone``
  is not UTC, so a value read as the server's local time would show.
- ``pooled_engine`` / ``pooled_store``: an engine built for the pooler
  (``JOBS_DATABASE_POOLER=transaction``, set for the test's duration so that what the test
  builds and spawns goes through the pooler too), its tables emptied.
- ``standby``: a primary and a streaming standby made by the session (``initdb`` +
  ``pg_basebackup -R``, on ports of 5440-5449), migrated, removed at the end; skipped, with the
  reason, where PostgreSQL's server binaries are not installed.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
import pytest
from sqlalchemy import text

from bench import cluster

if TYPE_CHECKING:
    from jobs_postgres.store import PostgresJobStore
    from sqlalchemy import Connection, Engine

POOLED_TIMEZONE = "America/Los_Angeles"
"""The pooled database's default ``timezone``: what a pooled session has (no startup setting)."""

POOL_SIZE = 10
"""Server connections the test pooler opens per database (a fleet shares them)."""

TABLES = (
    "jobs, job_attempts, api_tokens, job_workers, api_sessions, job_events, job_type_pauses,"
    " job_waits, job_wait_ends, job_rate_keys, schedules, schedule_runs, jobs_settings,"
    " job_org_quotas"
)
"""Every table a test empties before it runs: all that hold state except ``job_events_state``
(the event ids' key, made once by the migrations). A schedule left by one test fired jobs into
the next one's worker (``tests/postgres/test_schema_tables.py`` keeps this list complete)."""


DELETE_AT_MOST = 1000
"""A table holding at most this many rows is emptied by ``DELETE``, a fuller one by ``TRUNCATE``."""


@functools.cache
def _emptying(tables: str) -> str:
    names = [name.strip() for name in tables.split(",")]
    listed = ", ".join(f"'{n}'::regclass" for n in names)
    rows = " UNION ALL ".join(
        f"SELECT '{n}', (SELECT count(*) FROM (SELECT FROM {n} LIMIT {DELETE_AT_MOST + 1}) AS r)"
        for n in names
    )
    return f"""DO $$ DECLARE few text[]; many text; other regclass; held boolean; t text; BEGIN
  LOCK TABLE {", ".join(names)} IN ACCESS EXCLUSIVE MODE;
  SELECT array_agg(n) FILTER (WHERE c BETWEEN 1 AND {DELETE_AT_MOST}),
         string_agg(n, ', ') FILTER (WHERE c > {DELETE_AT_MOST})
    INTO few, many FROM ({rows}) AS f(n, c);
  IF few IS NOT NULL AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    many := concat_ws(', ', many, array_to_string(few, ', ')); few := NULL;
  END IF;
  IF few IS NOT NULL THEN
    -- a DELETE without triggers checks no foreign key: a table outside the list that refers to
    -- one emptied here (TRUNCATE ... CASCADE would empty it) and holds a row: TRUNCATE them all
    FOR other IN WITH RECURSIVE refs(rel) AS (
        SELECT conrelid FROM pg_constraint
         WHERE contype = 'f' AND confrelid = ANY (few::regclass[])
        UNION SELECT c.conrelid FROM pg_constraint c JOIN refs ON c.confrelid = refs.rel
         WHERE c.contype = 'f')
      SELECT rel FROM refs WHERE rel <> ALL (ARRAY[{listed}]) LOOP
      EXECUTE format('SELECT EXISTS (SELECT FROM %s)', other) INTO held;
      IF held THEN
        many := concat_ws(', ', many, array_to_string(few, ', ')); few := NULL; EXIT;
      END IF;
    END LOOP;
  END IF;
  IF few IS NOT NULL THEN
    PERFORM set_config('session_replication_role', 'replica', true);
    FOREACH t IN ARRAY few LOOP EXECUTE 'DELETE FROM ' || t; END LOOP;
    PERFORM set_config('session_replication_role', 'origin', true);
  END IF;
  IF many IS NOT NULL THEN EXECUTE 'TRUNCATE ' || many || ' CASCADE'; END IF;
END $$"""


def empty_tables(conn: Connection, tables: str = TABLES) -> None:
    """Empty ``tables`` (comma-separated) in the caller's transaction, as ``TRUNCATE ... CASCADE``
    would.

    They are all locked first, so a test that leaked a transaction writing one of them still
    fails here (``lock_timeout``) rather than leaving a row behind for the next test. Only the
    tables that hold a row are emptied, and a few rows (most tests leave a handful) by
    ``DELETE``: a ``TRUNCATE`` makes new files for the table and each of its indexes, ~80 ms for
    the jobs and their events against ~10 ms to delete their rows (measured side by side on the
    2-core machine), before each of some 1,500 PostgreSQL tests and state-machine examples. The
    ``DELETE`` runs as a replica's apply would (``session_replication_role``, a superuser's
    setting; without it, ``TRUNCATE``): no trigger writes an event of it, and no foreign key is
    checked, so a table outside ``tables`` that refers to one emptied and holds a row makes it a
    ``TRUNCATE ... CASCADE`` as before (every such table is in ``TABLES``). A table holding more
    than :data:`DELETE_AT_MOST` rows is truncated. The dead rows left behind are autovacuum's.
    """
    conn.execute(text("SET LOCAL lock_timeout = '10s'"))
    conn.execute(text(_emptying(tables)))


def _reachable_by_pooler(server_url: str) -> str | None:
    host = str(psycopg.conninfo.conninfo_to_dict(server_url).get("host") or "")
    if host.startswith("/") and os.geteuid() == 0:
        return (
            "the embedded test server listens on a socket of root's temporary directory, which"
            " the pooler (run as postgres) cannot reach: set JOBS_TEST_DATABASE_URL"
        )
    return None


@pytest.fixture(scope="session")
def pgbouncer(pg_server: str) -> Iterator[cluster.Bouncer]:
    """A PgBouncer (transaction pooling) in front of the session's server."""
    reason = cluster.missing(pooler=True) or _reachable_by_pooler(pg_server)
    if reason is not None:
        pytest.skip(f"no pooler for the pooler tests: {reason}")
    # Idle server connections are closed within seconds: the session's pooled databases must
    # not hold the server's connections an ``alone`` test needs (tests/conftest.py).
    with cluster.Bouncer(pg_server, pool_size=POOL_SIZE, server_idle_timeout=1) as bouncer:
        yield bouncer


@dataclass(frozen=True)
class PooledDatabase:
    """One migrated database, by its direct and its pooled URL."""

    name: str
    direct: str
    pooled: str


@pytest.fixture(scope="session")
def pooled_database(pg_server: str, pgbouncer: cluster.Bouncer) -> Iterator[PooledDatabase]:
    """A migrated database of its own, reached through the session's pooler."""
    from jobs_postgres import migrations
    from jobs_postgres.database import POOLER_ENV, drop_database, ensure_database, with_database

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"jobs_test_pooled_{worker}_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(pg_server, name)
    try:
        direct = with_database(pg_server, name)
        with psycopg.connect(direct, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" SET timezone = {POOLED_TIMEZONE!r}')
        pooled = pgbouncer.url(name)
        with pytest.MonkeyPatch.context() as env:  # the migrations run through the pooler too
            env.setenv(POOLER_ENV, "transaction")
            migrations.upgrade(pooled)
        yield PooledDatabase(name, direct, pooled)
    finally:
        drop_database(pg_server, name)


@pytest.fixture(scope="session")
def pooled_url(pooled_database: PooledDatabase) -> str:
    """The URL of the session's pooled database, through PgBouncer in transaction mode."""
    return pooled_database.pooled


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """``JOBS_DATABASE_POOLER=transaction`` for this test (engines it builds, children)."""
    from jobs_postgres.database import POOLER_ENV

    monkeypatch.setenv(POOLER_ENV, "transaction")


@pytest.fixture(scope="session")
def _pooled_session_engine(pooled_url: str) -> Iterator[Engine]:
    from jobs_postgres.database import create_engine

    engine = create_engine(pooled_url, pooler="transaction", pool_size=4, max_overflow=4)
    yield engine
    engine.dispose()


@pytest.fixture
def pooled_engine(_pooled_session_engine: Engine, pooled: None) -> Engine:
    """An engine through the pooler on the pooled database, whose tables are empty."""
    with _pooled_session_engine.begin() as conn:
        empty_tables(conn)
    return _pooled_session_engine


@pytest.fixture
def pooled_store(pooled_engine: Engine) -> PostgresJobStore:
    """An empty :class:`~jobs_postgres.store.PostgresJobStore` through the pooler (the contract
    suite's ``pooled`` adapter)."""
    from jobs_postgres.store import PostgresJobStore

    return PostgresJobStore(pooled_engine)


@dataclass(frozen=True)
class Standby:
    """A migrated database on a primary and its streaming standby."""

    primary: cluster.Cluster
    replica: cluster.Cluster
    database: str

    @property
    def primary_url(self) -> str:
        return self.primary.url(self.database)

    @property
    def standby_url(self) -> str:
        return self.replica.url(self.database)

    def pause(self) -> None:
        """Stop the standby's replay (it lags from now on)."""
        with psycopg.connect(self.replica.url(), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        """Resume the standby's replay."""
        with psycopg.connect(self.replica.url(), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def caught_up(self) -> bool:
        """True when the standby has replayed everything the primary wrote until now."""
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            written = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        with psycopg.connect(self.replica.url(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                (written[0] if written else "0/0",),
            ).fetchone()
        return bool(row and row[0])


@pytest.fixture(scope="session")
def standby() -> Iterator[Standby]:
    """A primary and a streaming standby of the session's own, with a migrated database."""
    from jobs_postgres import migrations
    from jobs_postgres.database import ensure_database

    reason = cluster.missing(server=True)
    if reason is not None:
        pytest.skip(f"no standby for the replica tests: {reason}")
    with cluster.primary_and_standby() as (primary, replica):
        ensure_database(primary.url(), "jobs")
        migrations.upgrade(primary.url("jobs"))
        yield Standby(primary, replica, "jobs")
