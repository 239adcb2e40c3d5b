"""The event feed on PostgreSQL: the ``job_events`` log the triggers of migration 0002 write.

Every visible change of a ``jobs`` row adds a row to ``job_events`` in the writer's transaction
(the trigger mirrors ``jobs_core.events.change_kind``), so whatever writes jobs (the store, a
module's SQL, a purge) is logged, and the log commits or rolls back with the change.

Order and completeness: a row's position is ``(xid, seq)``: the writer's transaction id, then a
sequence. A reader only takes rows whose ``xid`` is below the oldest transaction of this
database still running (``_BOUNDARY``): every such transaction has ended, so no row can appear
later *before* the reader's cursor. A row waits at most as long as the oldest open write
transaction of the database. Decision 0013 says why, and what was measured.

Wake-ups: none. The feed is polled (the API's hub reads every ``JOBS_EVENTS_POLL_S`` while a
stream is open): a NOTIFY in the claim's or the finish's transaction would serialise the commits
of every worker (PostgreSQL takes one lock for all notifying commits), which cost the drain
more than a poll of an index costs the API (decision 0013, bench/NOTES.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobs_core.domain import DedupScope, Job, Status
from jobs_core.events import EventBatch, EventKind, JobEvent, Position, Present
from sqlalchemy import Engine, text

from jobs_postgres.errors import unavailable_as_store_error
from jobs_postgres.schema import EVENT_JOB_COLUMNS

# The boundary of what is final: the oldest transaction of *this* database still running (or
# the snapshot's xmax when there is none). A transaction of another database can never write
# our log, so it is left out: one long transaction elsewhere on the server does not hold the
# stream back. Its database is read from pg_stat_get_activity; a transaction not found there
# (ended meanwhile, prepared, or hidden from a role without pg_read_all_stats) counts, which
# only makes the boundary earlier, never wrong.
_BOUNDARY = """
s AS (SELECT pg_current_snapshot() AS snap),
ours AS (
    SELECT x FROM s, pg_snapshot_xip(s.snap) AS x
    WHERE NOT EXISTS (
        SELECT 1 FROM pg_stat_get_activity(NULL) a
        WHERE a.backend_xid::text = (x::text::bigint % 4294967296)::text
          AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
    )
),
b AS (
    SELECT coalesce(
        (SELECT min(x::text::bigint) FROM ours), pg_snapshot_xmax(s.snap)::text::bigint
    ) AS boundary
    FROM s
)"""

# Index: job_events_pkey (xid, seq), bounded by the boundary of the statement's own snapshot.
_READ = f"""
WITH {_BOUNDARY}
SELECT e.xid::text::bigint, e.seq, e.kind, e.at, b.boundary, e.job_id, e.org_id,
       {{job}}
FROM b LEFT JOIN LATERAL (
    SELECT * FROM job_events e
    WHERE (e.xid, e.seq) > (CAST(CAST(:xid AS text) AS xid8), CAST(:seq AS bigint))
      AND e.xid < CAST(CAST(b.boundary AS text) AS xid8) {{org}}
    ORDER BY e.xid, e.seq
    LIMIT :limit
) e ON true
"""
_JOB = ", ".join(f"e.{name}" for name in EVENT_JOB_COLUMNS)
READ_ALL = text(_READ.format(org="", job=_JOB))
READ_ORG = text(_READ.format(org="AND e.org_id = :org_id", job=_JOB))

# The boundary, and whether it is the xid of a transaction the activity view did not show: one
# of another database that ended between the snapshot and that read (or a prepared one), which
# the boundary counts as ours to stay on the safe side (see :meth:`PostgresEventFeed.head`).
HEAD = text(
    f"""WITH {_BOUNDARY}
SELECT b.boundary, EXISTS (
    SELECT 1 FROM ours AS o
    WHERE o.x::text::bigint = b.boundary AND NOT EXISTS (
        SELECT 1 FROM pg_stat_get_activity(NULL) a
        WHERE a.backend_xid::text = (o.x::text::bigint % 4294967296)::text
    )
) FROM b"""
)
HEAD_TRIES = 5
"""How often :meth:`PostgresEventFeed.head` reads the boundary again while an unseen
transaction holds it (1 ms apart)."""
# One snapshot: the boundary, the snapshot's xmax, and this database's transactions running.
PRESENT = text(
    f"""WITH {_BOUNDARY}
SELECT b.boundary, pg_snapshot_xmax(s.snap)::text::bigint,
       coalesce((SELECT array_agg(x::text::bigint) FROM ours), '{{}}')
FROM b, s"""
)
STATE = text("SELECT id_key, horizon_xid, horizon_seq FROM job_events_state WHERE id = 1")

# The prune forgets a prefix of the log in position order: every row before the first one
# written at or after ``:before``. Positions follow commit order, so that prefix is the old part
# of the log; a row older than its position says (a long transaction's) waits for the next
# prune. No index on ``at``: each change of a job would write an entry into it.
#
# Index: job_events_pkey, walked from the oldest row up to the first young one.
FIRST_YOUNG = text(
    "SELECT xid::text::bigint, seq FROM job_events WHERE at >= :before ORDER BY xid, seq LIMIT 1"
)
_FORGET = """
WITH gone AS (DELETE FROM job_events e WHERE {bound} RETURNING xid, seq),
top AS (
    SELECT xid::text::bigint AS xid, seq FROM gone ORDER BY xid DESC, seq DESC LIMIT 1
),
moved AS (
    UPDATE job_events_state st SET horizon_xid = top.xid, horizon_seq = top.seq
    FROM top
    WHERE st.id = 1 AND (top.xid, top.seq) > (st.horizon_xid, st.horizon_seq)
)
SELECT count(*) FROM gone
"""
# Index: job_events_pkey, the range before the first young row. The horizon moves to the
# greatest position forgotten.
FORGET_BEFORE = text(
    _FORGET.format(
        bound="(e.xid, e.seq) < (CAST(CAST(:xid AS text) AS xid8), CAST(:seq AS bigint))"
    )
)
# Every row is old (none young was found in the same transaction): all of them.
FORGET_ALL_OLD = text(_FORGET.format(bound="e.at < :before"))


_FIELDS = ("id", "org_id", *EVENT_JOB_COLUMNS)
"""The fields of :class:`Job` a logged job sets, in the order :data:`READ_ALL` returns them (the
others keep their defaults: an event never shows the lease, the priority or the heartbeat)."""


def job_of(row: Sequence[Any]) -> Job:
    """The :class:`Job` of a logged row: its ``job_id``, ``org_id`` and job columns
    (``schema.EVENT_JOB_COLUMNS``), typed as in ``jobs``."""
    fields = dict(zip(_FIELDS, row, strict=True))
    fields["status"] = Status(fields["status"])
    fields["dedup_scope"] = DedupScope(fields["dedup_scope"])
    return Job(**fields)


READER_NAME = "jobs-events-reader"
"""The ``application_name`` of the feed's one reading connection (:class:`PostgresEventFeed`)."""


class PostgresEventFeed:
    """A ``jobs_core.events.EventFeed`` over ``job_events``.

    The reads of the whole log (``read`` without an org, ``head``, ``prune``: what the process's
    one hub does, whatever the number of streams) go through a connection of their own, named
    :data:`READER_NAME` in ``pg_stat_activity``: one per API process. The reads for one client
    (its replay after ``Last-Event-ID``, the snapshot of its start) use ``engine``'s pool like
    any request.
    """

    def __init__(self, engine: Engine) -> None:
        from jobs_postgres.database import create_engine

        self._engine = engine
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._reader = create_engine(
            engine.url.render_as_string(hide_password=False),
            session_settings={"application_name": READER_NAME},
            pool_size=1,
            max_overflow=0,
        )
        self._reading = self._reader.execution_options(isolation_level="AUTOCOMMIT")
        self._closed = threading.Event()
        self._key: bytes | None = None

    def read(self, after: Position, limit: int, org_id: str | None = None) -> EventBatch:
        """Up to ``limit`` final events after ``after``."""
        params: dict[str, Any] = {"xid": after.xid, "seq": after.seq, "limit": limit}
        statement, engine = READ_ALL, self._reading
        if org_id is not None:
            statement, params["org_id"], engine = READ_ORG, org_id, self._autocommit
        with unavailable_as_store_error(), engine.connect() as conn:
            rows = conn.execute(statement, params).all()
        events: list[JobEvent] = []
        boundary = rows[0][4] if rows else 0
        for xid, seq, kind, at, _, *job in rows:
            if xid is None:  # the LEFT JOIN's empty row: nothing to read
                continue
            events.append(JobEvent(Position(xid, seq), EventKind(kind), at, job_of(job)))
        if len(events) >= limit:
            return EventBatch(events, events[-1].position)
        # Nothing else is final below the boundary: no later row can come before (boundary, 0).
        cursor = max(after, Position(boundary, 0))
        if events:
            cursor = max(cursor, events[-1].position)
        return EventBatch(events, cursor)

    def head(self) -> Position:
        """``(boundary, 0)``: every row written from now on comes after it.

        The boundary is safe but may be early: a transaction of another database that ended
        between the snapshot and the read of the activity view is not known to be another
        database's, so it holds the boundary, and a reader starting there would read again
        changes committed before the head was asked for. Such a transaction has just ended:
        the head is read again (:data:`HEAD_TRIES` times, 1 ms apart) while one holds it.
        """
        with unavailable_as_store_error(), self._reading.connect() as conn:
            for _ in range(HEAD_TRIES):
                boundary, unseen = conn.execute(HEAD).one()
                if not unseen:
                    break
                time.sleep(0.001)
            return Position(int(boundary), 0)

    def present(self) -> Present:
        """The snapshot of now: below the boundary all committed, from ``xmax`` none, between
        them all but this database's transactions still running."""
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            boundary, xmax, running = conn.execute(PRESENT).one()
        return Present(Position(int(boundary), 0), Position(int(xmax), 0), frozenset(running))

    def horizon(self) -> Position:
        """The greatest position pruned."""
        _, xid, seq = self._state()
        return Position(xid, seq)

    def id_key(self) -> bytes:
        """The key made by the migration, shared by every process on the database."""
        if self._key is None:
            self._key = self._state()[0]
        return self._key

    def _state(self) -> tuple[bytes, int, int]:
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            key, xid, seq = conn.execute(STATE).one()
        return bytes(key), int(xid), int(seq)

    def wait(self, timeout: float) -> None:
        """Sleep ``timeout`` seconds (or until :meth:`close`): nothing signals a change, the
        log is polled (see the module's docstring)."""
        self._closed.wait(timeout)

    def prune(self, before: datetime) -> int:
        """Delete the events written before ``before``; the horizon follows."""
        with unavailable_as_store_error(), self._reader.begin() as conn:
            young = conn.execute(FIRST_YOUNG, {"before": before}).first()
            if young is None:
                return int(conn.execute(FORGET_ALL_OLD, {"before": before}).scalar_one())
            bound = {"xid": young[0], "seq": young[1]}
            return int(conn.execute(FORGET_BEFORE, bound).scalar_one())

    def close(self) -> None:
        """Wake a :meth:`wait` in progress; close the reading connection."""
        self._closed.set()
        self._reader.dispose()
