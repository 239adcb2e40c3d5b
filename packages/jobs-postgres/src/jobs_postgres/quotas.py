"""The PostgreSQL quota store: :class:`jobs_core.quotas.QuotaStore` on ``job_org_quotas``, and
the counts of queued jobs and schedules read where they are (decision 0033).

The queued count of one org stops at the quota (``LIMIT``): a range of ``jobs_org_queue_idx``
(queued jobs by org, the fair claim's index), at most ``max_queued`` entries, taken by an API
process at most once per second per org (:class:`jobs_core.quota_service.QuotaService`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobs_core.quotas import LIMITS, OrgUsage, QuotaOverride
from sqlalchemy import Engine, text

from jobs_postgres.errors import unavailable_as_store_error

_COLUMNS = "org_id, " + ", ".join(LIMITS) + ", updated_at, updated_by"

GET = text(f"SELECT {_COLUMNS} FROM job_org_quotas WHERE org_id = :org_id")
ALL = text(f"SELECT {_COLUMNS} FROM job_org_quotas ORDER BY org_id")
PUT = text(
    f"""INSERT INTO job_org_quotas ({_COLUMNS})
    VALUES (:org_id, {", ".join(":" + name for name in LIMITS)}, :now, :by)
    ON CONFLICT (org_id) DO UPDATE SET
        {", ".join(f"{name} = excluded.{name}" for name in LIMITS)},
        updated_at = excluded.updated_at, updated_by = excluded.updated_by
    RETURNING {_COLUMNS}"""
)
CLEAR = text("DELETE FROM job_org_quotas WHERE org_id = :org_id")
# jobs_org_queue_idx (org_id, ...) WHERE status = 'queued': a range of one org, stopped at cap.
QUEUED = text(
    """SELECT count(*) FROM (
        SELECT 1 FROM jobs WHERE org_id = :org_id AND status = 'queued' LIMIT :cap
    ) AS counted"""
)
# Every org's queued jobs and run-time schedules (jobs doctor, jobs quotas): a whole scan of
# the queued range of that index; an operator's read, never on a tenant's path.
USAGE = text(
    """SELECT org_id, sum(queued)::bigint AS queued, sum(schedules)::bigint AS schedules FROM (
        SELECT org_id, count(*) AS queued, 0 AS schedules FROM jobs
        WHERE status = 'queued' AND (CAST(:orgs AS text[]) IS NULL OR org_id = ANY(:orgs))
        GROUP BY org_id
        UNION ALL
        SELECT org_id, 0, count(*) FROM schedules
        WHERE source = 'api' AND (CAST(:orgs AS text[]) IS NULL OR org_id = ANY(:orgs))
        GROUP BY org_id
    ) AS used GROUP BY org_id ORDER BY org_id"""
)


class PostgresQuotaStore:
    """Overrides in ``job_org_quotas``; counts read from ``jobs`` and ``schedules``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def get_override(self, org_id: str) -> QuotaOverride | None:
        """The org's override, if any."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            row = conn.execute(GET, {"org_id": org_id}).one_or_none()
        return None if row is None else _override(row)

    def overrides(self) -> list[QuotaOverride]:
        """Every override, by org."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            return [_override(row) for row in conn.execute(ALL).all()]

    def set_override(self, override: QuotaOverride, now: datetime) -> QuotaOverride:
        """Store the org's override (an empty one removes it)."""
        with unavailable_as_store_error(), self._engine.begin() as conn:
            if override.empty:
                conn.execute(CLEAR, {"org_id": override.org_id})
                return QuotaOverride(
                    override.org_id, updated_at=now, updated_by=override.updated_by
                )
            params: dict[str, Any] = {
                "org_id": override.org_id,
                **override.limits(),
                "now": now,
                "by": override.updated_by,
            }
            return _override(conn.execute(PUT, params).one())

    def clear_override(self, org_id: str) -> bool:
        """Remove the org's override."""
        with unavailable_as_store_error(), self._engine.begin() as conn:
            return conn.execute(CLEAR, {"org_id": org_id}).rowcount > 0

    def queued_count(self, org_id: str, cap: int) -> int:
        """The org's queued jobs, counted up to ``cap``."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            return int(conn.execute(QUEUED, {"org_id": org_id, "cap": cap}).scalar_one())

    def usage(self, org_ids: Sequence[str] | None = None) -> list[OrgUsage]:
        """Queued jobs and run-time schedules per org (every org with any, with None)."""
        orgs = None if org_ids is None else sorted(set(org_ids))
        with unavailable_as_store_error(), self._engine.connect() as conn:
            rows = conn.execute(USAGE, {"orgs": orgs}).all()
        found = {
            row.org_id: OrgUsage(row.org_id, int(row.queued), int(row.schedules)) for row in rows
        }
        if orgs is None:
            return list(found.values())
        return [found.get(org, OrgUsage(org)) for org in orgs]


def _override(row: Any) -> QuotaOverride:
    return QuotaOverride(
        row.org_id,
        **{name: getattr(row, name) for name in LIMITS},
        updated_at=row.updated_at,
        updated_by=row.updated_by,
    )
