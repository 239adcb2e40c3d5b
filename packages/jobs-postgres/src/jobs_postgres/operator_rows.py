"""Operator reads on PostgreSQL: the live jobs counted by type and state;
:class:`~jobs_postgres.store.PostgresJobStore` is one. A job by id whatever its org, a job's
attempts and the pages of every org's jobs are :class:`jobs_postgres.reads.JobReads`'."""

from __future__ import annotations

from datetime import datetime

from jobs_postgres import attempt_tables
from jobs_postgres.connections import StoreConnections


class OperatorRows(StoreConnections):
    """The live jobs counted for the operators' metrics."""

    def active_counts(self, now: datetime) -> dict[tuple[str, str], int]:
        """The live jobs counted by type and state (``attempt_tables.ACTIVE_COUNTS``)."""
        rows = self._read(attempt_tables.ACTIVE_COUNTS, {"now": now})
        return {(job_type, state): int(count) for job_type, state, count in rows}
