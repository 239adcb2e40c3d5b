"""The list of tables every PostgreSQL test empties covers every table that holds state: a table
left out carries one test's rows into the next (a schedule left by one test fired jobs into the
next one's worker process)."""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from tests.pooling import DELETE_AT_MOST, TABLES, _emptying, empty_tables
from tests.postgres.store_kit import enqueue_n

if TYPE_CHECKING:
    from jobs_postgres.store import PostgresJobStore
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres

#: made once by the migrations and never written by a test
_KEPT = {"alembic_version_jobs", "job_events_state"}


def test_every_table_with_state_is_emptied_before_each_test(pg_server: str) -> None:
    # A database of its own, migrated by the jobs chain alone: the session's database also holds
    # the tables of the modules whose tests ran before this one in the same xdist worker (the
    # imports and linkcheck chains), which their own tests empty.
    from jobs_postgres import migrations
    from jobs_postgres.database import (
        create_engine,
        drop_database,
        ensure_database,
        with_database,
    )

    name = f"jobs_test_tables_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(pg_server, name)
    try:
        url = with_database(pg_server, name)
        migrations.upgrade(url)
        engine: Engine = create_engine(url)
        try:
            with engine.connect() as conn:
                names = set(
                    conn.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
                    ).scalars()
                )
        finally:
            engine.dispose()
    finally:
        drop_database(pg_server, name)
    emptied = {name.strip() for name in TABLES.split(",")}
    assert names - _KEPT == emptied


def test_emptying_truncates_the_tables_with_rows_and_waits_for_a_writer(
    pg_store: PostgresJobStore, pg_engine: Engine
) -> None:
    enqueue_n(pg_store, 3, datetime.now(UTC))  # job_attempts, empty, references jobs: CASCADE
    with pg_engine.begin() as conn:
        empty_tables(conn)
    with pg_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM jobs")).scalar_one() == 0

    # a transaction that wrote a row and is still open: the next test's emptying waits for it
    # and fails at the lock timeout rather than leaving the row behind
    enqueue_n(pg_store, 1, datetime.now(UTC))
    with pg_engine.connect() as writer:
        writer.execute(text("UPDATE jobs SET priority = priority"))
        with pg_engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '200ms'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                conn.execute(text(_emptying(TABLES)))
        writer.rollback()


def _rows(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def _file(engine: Engine, table: str) -> int:
    """The table's file number: a ``TRUNCATE`` gives it a new one, a ``DELETE`` does not."""
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT pg_relation_filenode('{table}')")).scalar_one())


def test_a_few_rows_are_deleted_unlogged_and_many_truncated(
    pg_store: PostgresJobStore, pg_engine: Engine
) -> None:
    enqueue_n(pg_store, 3, datetime.now(UTC))
    events = _rows(pg_engine, "job_events")
    assert events > 0  # the insert trigger logged the three
    before = _file(pg_engine, "jobs")
    with pg_engine.begin() as conn:
        empty_tables(conn, "jobs")
    assert _rows(pg_engine, "jobs") == 0
    assert _file(pg_engine, "jobs") == before  # deleted, not truncated
    assert _rows(pg_engine, "job_events") == events  # no deletion logged, as after a TRUNCATE

    enqueue_n(pg_store, DELETE_AT_MOST + 1, datetime.now(UTC))
    with pg_engine.begin() as conn:
        empty_tables(conn, "jobs, job_events")
    assert (_rows(pg_engine, "jobs"), _rows(pg_engine, "job_events")) == (0, 0)
    assert _file(pg_engine, "jobs") != before  # truncated


def test_a_row_outside_the_list_that_refers_to_an_emptied_one_is_emptied_with_it(
    pg_store: PostgresJobStore, pg_engine: Engine
) -> None:
    enqueue_n(pg_store, 2, datetime.now(UTC))
    with pg_engine.begin() as conn:  # an ended attempt of one of them (refers to jobs)
        conn.execute(
            text(
                "INSERT INTO job_attempts (job_id, attempt, started_at, ended_at, outcome)"
                " SELECT id, 1, now(), now(), 'failed' FROM jobs LIMIT 1"
            )
        )
    assert _rows(pg_engine, "job_attempts") == 1
    with pg_engine.begin() as conn:
        empty_tables(conn, "jobs")  # job_attempts is not listed: TRUNCATE jobs CASCADE
    assert (_rows(pg_engine, "jobs"), _rows(pg_engine, "job_attempts")) == (0, 0)
