"""Operator reads on PostgreSQL: a job's attempts (``job_attempts``), the live jobs counted by
type and state, a job by id whatever its org; :class:`~jobs_postgres.store.PostgresJobStore`
is one. One statement each."""

from __future__ import annotations

import uuid
from datetime import datetime

from jobs_core.domain import Job
from jobs_core.history import AttemptRecord

from jobs_postgres import attempt_tables, sql
from jobs_postgres.connections import StoreConnections
from jobs_postgres.rows import job_from_row


class OperatorRows(StoreConnections):
    """The attempts and the operators' reads across orgs."""

    def attempts(self, org_id: str, job_id: uuid.UUID) -> list[AttemptRecord]:
        """The records of the org's job's attempts, oldest first (``job_attempts``)."""
        rows = self._read(attempt_tables.ATTEMPTS, {"org_id": org_id, "id": job_id})
        return [attempt_tables.record_from_row(row) for row in rows]

    def active_counts(self, now: datetime) -> dict[tuple[str, str], int]:
        """The live jobs counted by type and state (``attempt_tables.ACTIVE_COUNTS``)."""
        rows = self._read(attempt_tables.ACTIVE_COUNTS, {"now": now})
        return {(job_type, state): int(count) for job_type, state, count in rows}

    def get_any_org(self, job_id: uuid.UUID) -> Job | None:
        """The job with this id, whichever org owns it (index: the primary key)."""
        rows = self._read(sql.GET_ANY_ORG, {"id": job_id})
        return job_from_row(rows[0]) if rows else None
