"""The Overview role on PostgreSQL (:class:`jobs_core.ports.Overview`, rules in
:mod:`jobs_core.overview`): each read is one statement computed by the server (counts, buckets
with ``date_bin`` on the epoch, percentiles with ``percentile_cont``), so only the small
aggregate leaves the database. :class:`~jobs_postgres.store.PostgresJobStore` is one.

Indexes (no new one: an index on ``jobs`` costs every enqueue and finish; ``bench/
overview_reads.py`` measures these reads at a given history size):

- :data:`TYPE_COUNTS`: ``jobs_org_type_created_idx`` / ``jobs_org_created_idx`` for the org's
  rows (``GET /jobs/stats`` reads the same rows).
- :data:`SERIES`: the org's types by a skip scan of ``jobs_org_type_created_idx``, then the
  jobs of those types finished in the window by ``jobs_finished_idx`` (retention's index), the
  org's live jobs, and their attempts through ``job_attempts_pkey``: the cost grows with what
  finished in the window, not with the history.
- :data:`BY_PREFIX`: a range of the primary key. :data:`BY_SHORT_ID`: the org's rows, each id's
  last eight digits compared (no index can serve a suffix without an expression index).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobs_core.domain import Job, Status
from jobs_core.overview import EPOCH, BucketFacts, Window, prefix_bounds, window_start
from sqlalchemy import text

from jobs_postgres.connections import StoreConnections
from jobs_postgres.job_rows import STATUS_OF, columns, job_from_row

_FINISHED = "('done', 'failed', 'cancelled')"


def type_counts_statement(statuses: bool, type_name: bool) -> Any:
    """The count per type and status of the org's jobs, with the filters asked for."""
    conditions = ["org_id = :org_id"]
    if statuses:
        conditions.append("status = ANY(:statuses)")
    if type_name:
        conditions.append("type = :type")
    return text(
        f"SELECT type, status, count(*) FROM jobs WHERE {' AND '.join(conditions)} GROUP BY 1, 2"
    )


# Per (type, bucket): the org's jobs finished in it by status with the percentiles of their
# wait (jobs_core.overview.wait_s), and the percentiles of the run time of the org's attempts
# that ended in it. Read without walking the org's history:
# 1. ``org_types``: the org's job types, by a skip scan of jobs_org_type_created_idx (one probe
#    per type, as the fair claim walks the orgs);
# 2. ``recent``: the jobs of those types finished since :start, by jobs_finished_idx (type,
#    finished_at) WHERE finished: a range per type, the org checked on each row; its cost grows
#    with what finished in the window (every org's, of those types), not with the history;
# 3. ``live``: the org's queued and running jobs (jobs_queue_idx's live rows);
# 4. their attempts that ended since :start, through job_attempts_pkey. An attempt that ended
#    in the window belongs to a job live now or finished in the window: no other is read.
SERIES = text(
    f"""WITH RECURSIVE org_types AS (
        (SELECT type FROM jobs WHERE org_id = :org_id ORDER BY type LIMIT 1)
        UNION ALL
        SELECT (SELECT j.type FROM jobs AS j
                WHERE j.org_id = :org_id AND j.type > t.type ORDER BY j.type LIMIT 1)
        FROM org_types AS t WHERE t.type IS NOT NULL
    ), recent AS (
        SELECT id, type, status, created_at, run_at, started_at, finished_at FROM jobs
        WHERE type = ANY(ARRAY(SELECT type FROM org_types WHERE type IS NOT NULL))
          AND status IN {_FINISHED} AND finished_at >= :start AND org_id = :org_id
    ), live AS (
        SELECT id, type FROM jobs
        WHERE status IN ('queued', 'running') AND org_id = :org_id
    ), finished AS (
        SELECT type, date_bin(:bucket, finished_at, :origin) AS bucket, status,
               extract(epoch FROM started_at - greatest(created_at, run_at))::float8 AS wait
        FROM recent
    ), ran AS (
        SELECT j.type, date_bin(:bucket, a.ended_at, :origin) AS bucket,
               extract(epoch FROM a.ended_at - a.started_at)::float8 AS run
        FROM (SELECT id, type FROM recent UNION ALL SELECT id, type FROM live) AS j
        JOIN job_attempts AS a ON a.job_id = j.id
        WHERE a.ended_at >= :start
    ), f AS (
        SELECT type, bucket,
               count(*) FILTER (WHERE status = 'done') AS done,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY wait) AS wait_p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) AS wait_p95
        FROM finished GROUP BY 1, 2
    ), r AS (
        SELECT type, bucket,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY run) AS run_p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY run) AS run_p95
        FROM ran GROUP BY 1, 2
    )
    SELECT coalesce(f.type, r.type), coalesce(f.bucket, r.bucket),
           coalesce(f.done, 0), coalesce(f.failed, 0), coalesce(f.cancelled, 0),
           f.wait_p50, f.wait_p95, r.run_p50, r.run_p95
    FROM f FULL JOIN r ON r.type = f.type AND r.bucket = f.bucket
    ORDER BY 1, 2"""
)

BY_PREFIX = text(
    f"""SELECT {columns("j")} FROM jobs AS j
    WHERE j.org_id = :org_id AND j.id BETWEEN :low AND :high ORDER BY j.id LIMIT :limit"""
)

BY_SHORT_ID = text(
    f"""SELECT {columns("j")} FROM jobs AS j
    WHERE j.org_id = :org_id AND right(j.id::text, 8) = :short ORDER BY j.id LIMIT :limit"""
)


class OverviewRows(StoreConnections):
    """An org's operations view, one statement per read."""

    def type_counts(
        self, org_id: str, statuses: frozenset[Status] | None, type_name: str | None
    ) -> list[tuple[str, Status, int]]:
        """The org's jobs counted per type and status, filtered as a list."""
        statement = type_counts_statement(statuses is not None, type_name is not None)
        params: dict[str, Any] = {"org_id": org_id, "type": type_name}
        if statuses is not None:
            params["statuses"] = sorted(s.value for s in statuses)
        rows = self._read(statement, params)
        return [(t, STATUS_OF[s], int(n)) for t, s, n in rows]

    def series(self, org_id: str, window: Window, now: datetime) -> list[BucketFacts]:
        """:data:`SERIES` over the window ending with the bucket of ``now``."""
        params = {
            "org_id": org_id,
            "bucket": window.bucket,
            "origin": EPOCH,
            "start": window_start(window, now),
        }
        return [BucketFacts(*row) for row in self._read(SERIES, params)]

    def find_by_prefix(self, org_id: str, prefix: str, limit: int) -> list[Job]:
        """The org's jobs whose id starts with ``prefix`` (a range of the primary key)."""
        low, high = prefix_bounds(prefix)
        params = {"org_id": org_id, "low": low, "high": high, "limit": max(0, limit)}
        return _jobs(self._read(BY_PREFIX, params))

    def find_by_short_id(self, org_id: str, short: str, limit: int) -> list[Job]:
        """The org's jobs whose id ends with ``short``."""
        params = {"org_id": org_id, "short": short.lower(), "limit": max(0, limit)}
        return _jobs(self._read(BY_SHORT_ID, params))


def _jobs(rows: Sequence[Any]) -> list[Job]:
    return [job_from_row(row) for row in rows]
