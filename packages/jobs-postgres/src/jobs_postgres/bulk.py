"""Large enqueues on PostgreSQL: COPY (decision 0004), for
:meth:`~jobs_postgres.store.PostgresJobStore.insert_many`.

- A batch without dedup keys cannot conflict (its ids are the caller's, uuid v7): it is COPied
  straight into ``jobs`` (:func:`copy_into_jobs`), with no temporary table, no INSERT … SELECT
  and no speculative insertion per row (ON CONFLICT); ``NOTIFY_INSERTED`` then sends what
  INSERT_MANY's CTE would, in the same transaction. ``payload`` is sent in jsonb's binary form
  (a version byte, 1, then the JSON text), declared as bytea: psycopg's jsonb dumper would
  serialise it again.
- A large batch with keys: COPY (binary) into a temporary table, then the same INSERT as
  INSERT_MANY from it (:func:`copy_insert`). COPY skips the per-element quoting and parsing of
  array parameters: about twice the rate of INSERT_MANY at tens of thousands of rows, for three
  more round trips.

With tracing on (decision 0039) a batch whose jobs carry a trace context writes the column
``trace_context`` too; without, the statements and rows are exactly those of before.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from jobs_core import codec, domain
from jobs_core.domain import Job, NewJob
from sqlalchemy import Connection, TextClause, text

from jobs_postgres import sql

_COPY_COLUMNS = (
    "id, org_id, type, payload, dedup_scope, max_attempts, created_at, run_at, priority,"
    " concurrency_key"
)
COPY_JOBS = f"COPY jobs ({_COPY_COLUMNS}) FROM STDIN (FORMAT BINARY)"
COPY_JOBS_TRACED = f"COPY jobs ({_COPY_COLUMNS}, trace_context) FROM STDIN (FORMAT BINARY)"
COPY_JOBS_TYPES = (
    "uuid",
    "text",
    "text",
    "bytea",
    "text",
    "int4",
    "timestamptz",
    "timestamptz",
    "int4",
    "text",
)
NOTIFY_INSERTED = "SELECT pg_notify('jobs_new', '')"

INCOMING_COLUMNS = (
    ("id", "uuid"),
    ("org_id", "text"),
    ("type", "text"),
    ("payload", "text"),
    ("dedup_key", "text"),
    ("dedup_scope", "text"),
    ("max_attempts", "int4"),
    ("run_at", "timestamptz"),
    ("priority", "int4"),
    ("concurrency_key", "text"),
)
_TRACE_COLUMN = ("trace_context", "text")


def traced(specs: Sequence[NewJob]) -> bool:
    """Whether any job of a batch carries a trace context (its column must be written)."""
    return any(spec.trace_context is not None for spec in specs)


def context_json(spec: NewJob) -> str | None:
    """The job's trace context as the JSON text the column is written from (None: none)."""
    return None if spec.trace_context is None else json.dumps(dict(spec.trace_context))


def copy_into_jobs(
    conn: Connection,
    new: Sequence[NewJob],
    ids: Sequence[uuid.UUID],
    now: datetime,
) -> list[Job]:
    """COPY a batch without dedup keys straight into ``jobs`` in the caller's transaction on
    ``conn``, then its notifications; the jobs inserted, in input order.

    The server inserts the rows as they arrive (psycopg sends each 32 kB of rows): each payload
    is encoded as its row is written, and the jobs are built before the COPY's end, so the
    client's work overlaps the server's instead of preceding and following it. A payload that
    cannot be encoded aborts the COPY, and the caller's transaction with it: nothing is kept.
    """
    with_context = traced(new)
    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    documents: list[NewJob] = []
    with driver.cursor() as cursor:
        with cursor.copy(COPY_JOBS_TRACED if with_context else COPY_JOBS) as copy:
            copy.set_types(COPY_JOBS_TYPES + (("bytea",) if with_context else ()))
            for job_id, spec in zip(ids, new, strict=True):
                payload, document = codec.encode_payload(spec.payload)
                row: tuple[Any, ...] = (
                    job_id,
                    spec.org_id,
                    spec.type,
                    b"\x01" + payload.encode(),  # jsonb's binary form, version 1
                    spec.dedup_scope.value,
                    spec.max_attempts,
                    now,
                    spec.run_at or now,
                    spec.priority,
                    spec.concurrency_key,
                )
                if with_context:
                    context = context_json(spec)
                    row += (None if context is None else b"\x01" + context.encode(),)
                copy.write_row(row)
                # Each job as the row holds it (the payload in JSON's types), as a read gives it.
                documents.append(
                    spec
                    if document is spec.payload
                    else dataclasses.replace(spec, payload=document)
                )
            jobs = domain.new_jobs(documents, ids, now)  # while the server takes the rows
        cursor.execute(NOTIFY_INSERTED)
    return jobs


def copy_insert(
    conn: Connection,
    new: Sequence[NewJob],
    ids: Sequence[uuid.UUID],
    payloads: Sequence[str],
    now: datetime,
) -> list[Any]:
    """COPY a batch into a temporary table, then INSERT_MANY's statement from it, in the
    caller's transaction on ``conn``; the statement's rows."""
    with_context = traced(new)
    columns = INCOMING_COLUMNS + ((_TRACE_COLUMN,) if with_context else ())
    table = f"jobs_incoming_{secrets.token_hex(6)}"
    listed = ", ".join(f"{name} {kind}" for name, kind in columns)
    conn.execute(text(f"CREATE TEMPORARY TABLE {table} ({listed}) ON COMMIT DROP"))
    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    statement = f"COPY {table} FROM STDIN (FORMAT BINARY)"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types([kind for _, kind in columns])
        for job_id, spec, payload in zip(ids, new, payloads, strict=True):
            row: tuple[Any, ...] = (
                job_id,
                spec.org_id,
                spec.type,
                payload,
                spec.dedup_key,
                spec.dedup_scope.value,
                spec.max_attempts,
                spec.run_at,
                spec.priority,
                spec.concurrency_key,
            )
            copy.write_row((*row, context_json(spec)) if with_context else row)
    inserted: TextClause = text(sql.insert_many_from(f"{table} AS n", traced=with_context))
    rows = list(conn.execute(inserted, {"now": now}).all())
    # Dropped at once (a caller's transaction may go on for long).
    conn.execute(text(f"DROP TABLE {table}"))
    return rows
