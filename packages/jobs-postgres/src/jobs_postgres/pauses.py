"""Paused job types on PostgreSQL (the ``TypePauses`` role of the job store, revision
``0014_job_type_pauses``): one row per paused type. The claim reads the table itself
(``jobs_postgres.claims``), so a pause holds from its commit on, for every claimer; a resume
notifies ``jobs_new`` in its statement, so idle workers claim the type's jobs at once.
"""

from __future__ import annotations

from datetime import datetime

from jobs_core.pauses import TypePause
from sqlalchemy import Column, Table, Text

from jobs_postgres.connections import StoreConnections
from jobs_postgres.schema import TIMESTAMPTZ, metadata
from jobs_postgres.sql import NEW_WORK_CHANNEL

job_type_pauses = Table(
    "job_type_pauses",
    metadata,
    Column("type", Text, primary_key=True),
    Column("paused_at", TIMESTAMPTZ, nullable=False),
    Column("paused_by", Text, nullable=False),
)

# The first pause stays: ON CONFLICT DO NOTHING, then the row whoever wrote it.
PAUSE = """
WITH added AS (
    INSERT INTO job_type_pauses (type, paused_at, paused_by)
    VALUES (%(type)s, %(now)s, %(by)s)
    ON CONFLICT (type) DO NOTHING
    RETURNING type, paused_at, paused_by
)
SELECT type, paused_at, paused_by FROM added
UNION ALL
SELECT type, paused_at, paused_by FROM job_type_pauses WHERE type = %(type)s
LIMIT 1
"""
RESUME = f"""
WITH resumed AS (DELETE FROM job_type_pauses WHERE type = %(type)s RETURNING type)
SELECT r.type, pg_notify('{NEW_WORK_CHANNEL}', '') FROM resumed AS r
"""
PAUSED = "SELECT type, paused_at, paused_by FROM job_type_pauses ORDER BY type"


class TypePauseRows(StoreConnections):
    """:class:`jobs_core.ports.TypePauses` on ``job_type_pauses``, one statement per call;
    :class:`~jobs_postgres.store.PostgresJobStore` is one."""

    def pause(self, job_type: str, by: str, now: datetime) -> TypePause:
        """Pause ``job_type`` (the first pause stays)."""
        params = {"type": job_type, "by": by, "now": now}
        row = self._on_driver(lambda execute, _: execute(PAUSE, params))
        return TypePause(row[0], row[1], row[2])

    def resume(self, job_type: str) -> bool:
        """Resume ``job_type`` and wake the idle workers; False if it was not paused."""
        row = self._on_driver(lambda execute, _: execute(RESUME, {"type": job_type}))
        return row is not None

    def paused(self) -> list[TypePause]:
        """The paused types, by name."""
        rows = self._in_transaction(lambda execute: execute(PAUSED, {}))
        return [TypePause(row[0], row[1], row[2]) for row in rows]
