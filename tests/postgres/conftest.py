"""Fixtures of the PostgreSQL adapter tests (the database itself comes from the root conftest)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import DedupScope, FakeClock, JobContext, JobType, Registry

from tests.dropping import drop_later
from tests.postgres.plans import HISTORY

if TYPE_CHECKING:
    import psycopg

# A million finished rows: every status of history, 50 orgs, priorities and concurrency keys,
# a month old. None of them is in the partial indexes a claim walks.
_HISTORY_FILL = """
INSERT INTO jobs (id, org_id, type, status, payload, created_at, run_at, finished_at, attempts,
                  priority, concurrency_key)
SELECT gen_random_uuid(), 'org-' || (i %% 50), 'history',
       (ARRAY['done', 'failed', 'cancelled'])[1 + i %% 3], '{}'::jsonb,
       now() - interval '30 days' - make_interval(secs => i),
       now() - interval '30 days' - make_interval(secs => i), now() - interval '30 days', 1,
       (i %% 7) - 3, 'site-' || (i %% 1000)
FROM generate_series(1, %(history)s) AS i
"""

# How to drop and how to rebuild each index of ``jobs`` and each constraint on or referencing it,
# in the order to rebuild them: its key, its other indexes, then the foreign keys to it.
_JOBS_INDEXES = """
SELECT CASE c.contype WHEN 'p' THEN 0 WHEN 'u' THEN 1 ELSE 2 END AS rank,
       format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname),
       format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass, c.conname,
              pg_get_constraintdef(c.oid))
FROM pg_constraint c
WHERE (c.conrelid = 'jobs'::regclass AND c.contype IN ('p', 'u'))
   OR (c.confrelid = 'jobs'::regclass AND c.contype = 'f')
UNION ALL
SELECT 1, format('DROP INDEX %s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid)
FROM pg_index i
WHERE i.indrelid = 'jobs'::regclass
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid
                                                  AND c.conrelid = i.indrelid)
ORDER BY rank
"""


def _fill_history(conn: psycopg.Connection[Any], count: int) -> None:
    """Insert ``count`` finished rows into the empty ``jobs`` table, with its indexes and the
    constraints on or referencing it dropped meanwhile and rebuilt after, each from its own
    definition (so the schema ends as the migrations left it): one sorted build per index
    instead of a million random inserts into each. On the quiet 2-core machine, the fill alone
    on its server: 27.4 s -> 15.2 s; the setup that builds the template on the embedded server:
    40.7 s -> 18.7 s."""
    with conn.transaction():
        rebuild = conn.execute(_JOBS_INDEXES).fetchall()
        for _, drop, _ in reversed(rebuild):
            conn.execute(drop)
        conn.execute(_HISTORY_FILL, {"history": count})
        for _, _, create in rebuild:
            conn.execute(create)


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def registry() -> Registry:
    """Two no-op types, one per dedup scope."""
    registry = Registry("postgres-tests")

    def noop(ctx: JobContext) -> None:
        return None

    registry.register(JobType("reconcile", noop, dedup_scope=DedupScope.QUEUE))
    registry.register(JobType("crawl", noop, dedup_scope=DedupScope.ACTIVE))
    return registry


@pytest.fixture
def scratch_url(pg_server: str) -> Iterator[str]:
    """A new, empty (unmigrated) database on the session's server, dropped after the test (off
    its clock: :mod:`tests.dropping`)."""
    from jobs_postgres.database import ensure_database, with_database

    name = f"jobs_pg_scratch_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(pg_server, name)
    try:
        yield with_database(pg_server, name)
    finally:
        drop_later(pg_server, name)


@pytest.fixture(scope="session")
def history_template(pg_server: str) -> Iterator[str]:
    """The name of a migrated database holding :data:`HISTORY` finished jobs, built once per
    test session (an xdist worker) and dropped at its end: the template of :func:`history_url`.
    The tests that use it share an ``xdist_group``, so one worker builds it for all of them."""
    import psycopg
    from jobs_postgres import migrations
    from jobs_postgres.database import drop_database, ensure_database, libpq_url, with_database

    name = f"jobs_pg_history_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(pg_server, name)
    try:
        url = with_database(pg_server, name)
        migrations.upgrade(url)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            # without the insert trigger's event rows (a million more rows no plan test reads),
            # and with room for each index build to sort in memory
            conn.execute("SET session_replication_role = replica")
            conn.execute("SET maintenance_work_mem = '256MB'")
            _fill_history(conn, HISTORY)
            conn.execute("ANALYZE jobs")
        yield name
    finally:
        drop_database(pg_server, name)


@pytest.fixture
def history_url(pg_server: str, history_template: str) -> Iterator[str]:
    """A database of its own for the test, copied from :func:`history_template` (a file copy
    of the million rows instead of inserting them again), dropped after the test (off its
    clock)."""
    import psycopg
    from jobs_postgres.database import libpq_url, with_database
    from psycopg import sql

    name = f"jobs_pg_history_copy_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(libpq_url(pg_server), autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(history_template)
            )
        )
    try:
        yield with_database(pg_server, name)
    finally:
        drop_later(pg_server, name)
