"""Schedules, their fired ticks, run-time settings, and the finished-jobs index of the purge.

Revision ID: 0004_schedules_retention
Revises: 0003_flow_control
Create Date: 2026-12-03

Touches only its own objects: three new tables and one new index on ``jobs``. The index is
built with a plain CREATE INDEX inside the migration's transaction, which blocks writes to
``jobs`` while it builds: on a large existing table, build it first by hand with
``CREATE INDEX CONCURRENTLY jobs_finished_idx ON jobs (type, finished_at, id) WHERE status IN
('done', 'failed', 'cancelled')`` and this migration skips it (docs/retention.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID

revision: str = "0004_schedules_retention"
down_revision: str | None = "0003_flow_control"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", UUID(as_uuid=True), primary_key=True, server_default=sa.text("uuidv7()")),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("job_type", sa.Text, nullable=False),
        sa.Column("payload", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("cron", sa.Text, nullable=False),
        sa.Column("timezone", sa.Text, nullable=False, server_default=sa.text("'UTC'")),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.text("true")),
        sa.Column("missed", sa.Text, nullable=False, server_default=sa.text("'once'")),
        sa.Column("max_catchup", sa.Integer, nullable=False, server_default=sa.text("10")),
        sa.Column("description", sa.Text, nullable=False, server_default=sa.text("''")),
        sa.Column("source", sa.Text, nullable=False, server_default=sa.text("'api'")),
        sa.Column("next_run_at", TZ, nullable=False),
        sa.Column("last_run_at", TZ),
        sa.Column("last_job_id", UUID(as_uuid=True)),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("updated_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.CheckConstraint("missed IN ('skip', 'once', 'each')", name="schedules_missed_check"),
        sa.CheckConstraint("source IN ('code', 'api')", name="schedules_source_check"),
        sa.CheckConstraint("max_catchup BETWEEN 1 AND 100", name="schedules_max_catchup_check"),
        sa.UniqueConstraint("org_id", "name", name="schedules_org_name_key"),
    )
    op.create_index(
        "schedules_due_idx", "schedules", ["next_run_at"], postgresql_where=sa.text("enabled")
    )
    op.create_table(
        "schedule_runs",
        sa.Column(
            "schedule_id",
            UUID(as_uuid=True),
            sa.ForeignKey(
                "schedules.id", ondelete="CASCADE", name="schedule_runs_schedule_id_fkey"
            ),
            nullable=False,
        ),
        sa.Column("tick", TZ, nullable=False),
        sa.Column("job_id", UUID(as_uuid=True), nullable=False),
        sa.Column("fired_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("schedule_id", "tick", name="schedule_runs_pkey"),
    )
    op.create_table(
        "jobs_settings",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", JSONB, nullable=False),
        sa.Column("updated_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("updated_by", sa.Text),
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS jobs_finished_idx ON jobs (type, finished_at, id) "
        "WHERE status IN ('done', 'failed', 'cancelled')"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS jobs_finished_idx")
    op.drop_table("jobs_settings")
    op.drop_table("schedule_runs")
    op.drop_index("schedules_due_idx", table_name="schedules")
    op.drop_table("schedules")
