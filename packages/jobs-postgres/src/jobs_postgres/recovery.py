"""Recovery on PostgreSQL (the ``Recovery`` role of the job store): the end hooks due to run,
taken and marked done, and the running jobs whose worker went silent (the sweep's candidates)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobs_core.domain import Job

from jobs_postgres import sql
from jobs_postgres.connections import StoreConnections
from jobs_postgres.job_rows import job_from_row


class RecoveryRows(StoreConnections):
    """:class:`jobs_core.ports.Recovery` on ``jobs``; :class:`~jobs_postgres.store.PostgresJobStore`
    is one."""

    def take_end_hooks(
        self, types: Sequence[str], limit: int, now: datetime, retry_at: datetime
    ) -> list[Job]:
        """Up to ``limit`` jobs of ``types`` whose end hook is due, each due again at
        ``retry_at`` (SKIP LOCKED: none to two callers)."""
        if limit <= 0 or not types:
            return []
        rows = self._rows(
            sql.TAKE_END_HOOKS,
            {"types": list(types), "limit": limit, "now": now, "retry_at": retry_at},
        )
        return sorted(
            (job_from_row(row) for row in rows), key=lambda job: (job.finished_at, job.id)
        )

    def end_hooks_done(self, jobs: Sequence[Job]) -> None:
        """Clear the due hooks of ``jobs`` that still have the same ending."""
        if not jobs:
            return
        with self._statement() as conn:
            conn.execute(
                sql.END_HOOKS_DONE,
                {"ids": [job.id for job in jobs], "ends": [job.finished_at for job in jobs]},
            )

    def find_stale(self, stale_before: datetime, limit: int) -> list[Job]:
        """Running jobs whose last sign of life is older than ``stale_before``."""
        if limit <= 0:
            return []
        rows = self._rows(sql.FIND_STALE, {"stale_before": stale_before, "limit": limit})
        return [job_from_row(row) for row in rows]
