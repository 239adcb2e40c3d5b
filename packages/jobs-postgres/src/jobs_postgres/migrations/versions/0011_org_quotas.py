"""Quotas per org: the operators' overrides (decision 0033).

Revision ID: 0011_org_quotas
Revises: 0010_typed_event_log
Create Date: 2026-12-05

``job_org_quotas`` holds one row per org whose quotas an operator changed (``jobs quotas set``,
``PUT /settings/quotas/{org}``); a NULL limit keeps the deployable's default (``JOBS_QUOTA_*``).
Nothing else changes: the counts a quota needs are read through existing indexes.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011_org_quotas"
down_revision: str | None = "0010_typed_event_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table of overrides."""
    op.execute(
        """CREATE TABLE job_org_quotas (
            org_id text PRIMARY KEY,
            max_schedules integer,
            min_schedule_interval_s integer,
            max_queued integer,
            enqueue_rate double precision,
            enqueue_burst integer,
            updated_at timestamptz NOT NULL DEFAULT now(),
            updated_by text NOT NULL DEFAULT '',
            CONSTRAINT job_org_quotas_max_schedules_check CHECK (max_schedules >= 0),
            CONSTRAINT job_org_quotas_min_schedule_interval_s_check
                CHECK (min_schedule_interval_s >= 1),
            CONSTRAINT job_org_quotas_max_queued_check CHECK (max_queued >= 0),
            CONSTRAINT job_org_quotas_enqueue_rate_check CHECK (enqueue_rate > 0),
            CONSTRAINT job_org_quotas_enqueue_burst_check CHECK (enqueue_burst >= 1)
        )"""
    )


def downgrade() -> None:
    """Drop it (the overrides are lost: every org gets the defaults)."""
    op.execute("DROP TABLE job_org_quotas")
