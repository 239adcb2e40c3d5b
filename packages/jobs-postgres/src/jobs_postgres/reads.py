"""The reads of jobs on PostgreSQL without SQLAlchemy (decision 0049): a job, a page of jobs, a
job's attempts, what it awaits, its children counted, the live workers. Each statement is
written once, here, in psycopg's syntax, and read back once (:class:`JobReads`), for two runners:

- the job store (:class:`~jobs_postgres.store.PostgresJobStore` is a :class:`JobReads`): on its
  engine's pooled connections, retried once on a connection found lost, or inside a caller's
  transaction (``jobs_postgres.connections.StoreConnections``);
- :class:`DirectReads`: one psycopg connection of its own, for a one-shot process that reads and
  exits: the CLI's ``jobs ls``, ``jobs show`` and ``jobs workers``, which then import neither
  SQLAlchemy nor the store (psycopg alone: about half the start-up of a read command).

Every driver error is translated as on every other path (``errors.unavailable_as_store_error``).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from jobs_core.history import AttemptOutcome, AttemptRecord
from jobs_core.listing import CHILD_ENDED, LISTED_FIELDS, ChildCounts
from jobs_core.ports import JobFilter
from jobs_core.states import Status
from jobs_core.waits import Awaited
from jobs_core.workers import WorkerInfo, live_after

from jobs_postgres.errors import unavailable_as_store_error
from jobs_postgres.job_rows import COLUMNS, columns, job_from_row, listed_row

if TYPE_CHECKING:
    import psycopg
    from jobs_core.domain import Job

T = TypeVar("T")
Rows = Callable[[str, Mapping[str, Any]], list[Any]]
"""Runs one statement (psycopg's ``%(name)s`` syntax) and gives its rows (none for a SET)."""


# -- the statements -----------------------------------------------------------------------------

# Index: the primary key; the org filter makes another org's job invisible.
GET = f"SELECT {columns('j')} FROM jobs AS j WHERE j.id = %(id)s AND j.org_id = %(org_id)s"

# Index: the primary key. An operator's read (the CLI's ``jobs show ID``), of any org.
GET_ANY_ORG = f"SELECT {columns('j')} FROM jobs AS j WHERE j.id = %(id)s"


def list_jobs(org_id: str | None, query: JobFilter) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of a page of jobs newest first, from the keyset cursor
    ``query.before`` = (created_at, id); with ``org_id`` None, the jobs of every org (an
    operator's read: the CLI's ``jobs ls``).

    With ``query.field_bytes``, each of payload, progress and report whose JSON text is larger
    is NULL, and the row ends with the three sizes (``jobs_core.listing.LISTED_FIELDS``; NULL
    for a value kept; :func:`~jobs_postgres.job_rows.listed_row`): a large value never leaves
    the database (``jobs_core.listing``). The sizes are computed only for the rows of the page
    (the projection runs under the LIMIT).

    Index: jobs_org_type_created_idx with a type, jobs_org_created_idx without; both are in
    (created_at DESC, id DESC) order after the equality columns, so the page is read in order
    and the row comparison of the cursor is an index condition. Across orgs no index has that
    order: the matching rows are sorted for the top ``limit`` (an operator's read, rare).

    With ``query.parent_id``, only that job's children: read through ``jobs_parent_idx``
    (migration 0019, decision 0045) and sorted for the page, or through the org's index above
    filtered on ``parent_id`` when they are among its newest jobs, the planner choosing (a
    parent's children are at most the ten thousand its attempts may hold, times its rounds of
    waiting).
    """
    params: dict[str, Any] = {"limit": query.limit}
    where: list[str] = []
    if org_id is not None:
        where.append("j.org_id = %(org_id)s")
        params["org_id"] = org_id
    if query.statuses is not None:
        where.append("j.status = ANY(CAST(%(statuses)s AS text[]))")
        params["statuses"] = sorted(status.value for status in query.statuses)
    if query.type is not None:
        where.append("j.type = %(type)s")
        params["type"] = query.type
    if query.parent_id is not None:
        where.append("j.parent_id = CAST(%(parent_id)s AS uuid)")
        params["parent_id"] = query.parent_id
    if query.before is not None:
        where.append(
            "(j.created_at, j.id)"
            " < (CAST(%(before_at)s AS timestamptz), CAST(%(before_id)s AS uuid))"
        )
        params["before_at"], params["before_id"] = query.before
    selected, source = columns("j"), "jobs AS j"
    if query.field_bytes is not None:
        params["field_bytes"] = query.field_bytes
        over = {name: f"s.{name} > CAST(%(field_bytes)s AS integer)" for name in LISTED_FIELDS}
        selected = ", ".join(
            [
                f"CASE WHEN {over[name]} THEN NULL ELSE j.{name} END AS {name}"
                if name in over
                else f"j.{name}"
                for name in COLUMNS
            ]
            + [f"CASE WHEN {over[name]} THEN s.{name} END" for name in LISTED_FIELDS]
        )
        sizes = ", ".join(f"octet_length(CAST(j.{n} AS text)) AS {n}" for n in LISTED_FIELDS)
        source = f"jobs AS j JOIN LATERAL (SELECT {sizes}) AS s ON true"
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    statement = (
        f"SELECT {selected} FROM {source}{condition}"
        " ORDER BY j.created_at DESC, j.id DESC LIMIT CAST(%(limit)s AS integer)"
    )
    return statement, params


# The org's job's attempt records, oldest first. Index: the primary key of jobs (the org check),
# then job_attempts_pkey's range of the job (``jobs_postgres.attempt_tables.job_attempts``).
ATTEMPTS = """SELECT a.job_id, a.attempt, a.started_at, a.ended_at, a.worker, a.outcome,
    a.error, a.traceback
    FROM job_attempts AS a
    WHERE a.job_id = (SELECT j.id FROM jobs AS j WHERE j.id = %(id)s AND j.org_id = %(org_id)s)
    ORDER BY a.attempt"""


def record_from_row(row: Sequence[Any]) -> AttemptRecord:
    """A row of :data:`ATTEMPTS` as the domain's record."""
    job_id, attempt, started_at, ended_at, worker, outcome, error, traceback = row
    return AttemptRecord(
        job_id=job_id,
        attempt=attempt,
        started_at=started_at,
        ended_at=ended_at,
        worker=worker,
        outcome=AttemptOutcome(outcome),
        error=error,
        traceback=traceback,
    )


# The children of the jobs of a listed page, counted in one grouped statement whatever the
# page's size (decision 0045); which child has *ended* is the core's rule
# (``jobs_core.listing.CHILD_ENDED``), passed as a parameter. Index: ``jobs_parent_idx``
# (migration 0019: ``(parent_id) WHERE parent_id IS NOT NULL``), one range per parent of the
# page; the statement repeats ``parent_id IS NOT NULL`` so that the planner matches the partial
# index whatever the plan (a generic plan cannot prove it from ``= ANY(...)``).
CHILDREN_COUNTS = (
    "SELECT parent_id, count(*),"
    " count(*) FILTER (WHERE status = ANY(CAST(%(ended)s AS text[]))) FROM jobs"
    " WHERE parent_id IS NOT NULL AND parent_id = ANY(CAST(%(parents)s AS uuid[]))"
    " AND org_id = %(org_id)s"
    " GROUP BY parent_id"
)

# What the org's job awaits, in the order given, in one read: no row when the job is not the
# org's, one row of NULLs when it awaits none (or what it awaited was purged since). Index: the
# primary key, job_waits_waiter_idx, then the awaited jobs' primary key.
AWAITED = """SELECT a.id, a.type, a.status
    FROM jobs AS o
    LEFT JOIN job_waits AS w ON w.waiter = o.id
    LEFT JOIN jobs AS a ON a.id = w.awaited
    WHERE o.id = %(id)s AND o.org_id = %(org_id)s
    ORDER BY w.ord"""


# -- the reads ---------------------------------------------------------------------------------


class JobReads(ABC):
    """The reads, on whatever runs their statements (:meth:`_read_rows`, :meth:`_in_transaction`):
    the store's connections, or :class:`DirectReads`' one."""

    @abstractmethod
    def _read_rows(self, query: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one read-only statement (errors translated)."""

    @abstractmethod
    def _in_transaction(self, run: Callable[[Rows], T]) -> T:
        """``run(rows)`` in one transaction (errors translated)."""

    def get(self, org_id: str, job_id: uuid.UUID) -> Job | None:
        """The org's job, or None."""
        rows = self._read_rows(GET, {"org_id": org_id, "id": job_id})
        return job_from_row(rows[0]) if rows else None

    def get_any_org(self, job_id: uuid.UUID) -> Job | None:
        """The job with this id, whichever org owns it (index: the primary key)."""
        rows = self._read_rows(GET_ANY_ORG, {"id": job_id})
        return job_from_row(rows[0]) if rows else None

    def list_jobs(self, org_id: str, query: JobFilter) -> list[Job]:
        """The org's jobs matching ``query``, newest first."""
        return self._listing(org_id, query)

    def list_all_orgs(self, query: JobFilter) -> list[Job]:
        """The jobs of every org matching ``query``, newest first, in one statement."""
        return self._listing(None, query)

    def _listing(self, org_id: str | None, query: JobFilter) -> list[Job]:
        """The jobs of the org (of every org for None) matching ``query``, newest first, in one
        statement; values over ``query.field_bytes`` left out by the query (``listed_row``)."""
        if query.limit <= 0:
            return []
        as_job = job_from_row if query.field_bytes is None else listed_row
        return [as_job(row) for row in self._read_rows(*list_jobs(org_id, query))]

    def attempts(self, org_id: str, job_id: uuid.UUID) -> list[AttemptRecord]:
        """The records of the org's job's attempts, oldest first (``job_attempts``)."""
        rows = self._read_rows(ATTEMPTS, {"org_id": org_id, "id": job_id})
        return [record_from_row(row) for row in rows]

    def children_counts(
        self, org_id: str, parent_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, ChildCounts]:
        """The org's children of each of ``parent_ids`` that has some, and how many ended."""
        if not parent_ids:
            return {}
        params = {
            "org_id": org_id,
            "parents": list(dict.fromkeys(parent_ids)),
            "ended": sorted(status.value for status in CHILD_ENDED),
        }
        rows = self._read_rows(CHILDREN_COUNTS, params)
        return {parent: ChildCounts(int(total), int(ended)) for parent, total, ended in rows}

    def awaited(self, org_id: str, job_id: uuid.UUID) -> list[Awaited] | None:
        """The jobs the org's job awaits, in the order given; None if it is not the org's."""
        rows = self._read_rows(AWAITED, {"id": job_id, "org_id": org_id})
        if not rows:
            return None
        return [Awaited(row[0], row[1], Status(row[2])) for row in rows if row[0] is not None]

    def live_workers(self, now: datetime) -> list[WorkerInfo]:
        """The live workers, oldest first (the silent ones are forgotten: ``job_workers``)."""
        from jobs_postgres import flow  # the worker registry's statements (and the claim's)

        params = {"live_after": live_after(now)}

        def run(rows: Rows) -> list[Any]:
            rows(flow.FORGET_SILENT + " RETURNING id", params)
            return rows(flow.LIVE, params)

        return [
            WorkerInfo(row[0], row[1], row[2], tuple(row[3]), row[4], row[5], row[6])
            for row in self._in_transaction(run)
        ]


def fetched(cursor: Any) -> list[Any]:
    """The rows of a psycopg cursor; none for a statement that returns none (SET)."""
    return list(cursor.fetchall()) if cursor.description is not None else []


class DirectReads(JobReads):
    """:class:`JobReads` on one psycopg connection of its own, in autocommit: no pool, no
    retry (a one-shot command that finds the server gone says so and exits)."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection

    @classmethod
    @contextmanager
    def open(cls, url: str) -> Iterator[DirectReads]:
        """The reads on a new connection to ``url`` (the session settings every engine's
        connections get: ``jobs_postgres.connect.connect``), closed at the end."""
        from jobs_postgres.connect import connect

        with unavailable_as_store_error():
            connection = connect(url)
        with connection:
            yield cls(connection)

    def _read_rows(self, query: str, params: Mapping[str, Any]) -> list[Any]:
        with unavailable_as_store_error():
            return fetched(self.connection.execute(query, params))

    def _in_transaction(self, run: Callable[[Rows], T]) -> T:
        connection = self.connection
        with unavailable_as_store_error(), connection.transaction():
            return run(lambda query, params: fetched(connection.execute(query, params or None)))
