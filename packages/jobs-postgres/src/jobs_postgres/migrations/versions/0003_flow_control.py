"""Flow control: priority, concurrency key and snooze count on jobs; the claim index in priority
order; the running-per-key index; the registry of live workers (decision 0015).

Revision ID: 0003_flow_control
Revises: 0002_events
Create Date: 2026-12-03

A frozen snapshot, as every migration: the objects are spelled out here.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, TIMESTAMP, UUID

revision: str = "0003_flow_control"
down_revision: str | None = "0002_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    # Constant defaults: PostgreSQL adds these columns without rewriting the table.
    op.add_column("jobs", sa.Column("priority", sa.Integer, nullable=False, server_default="0"))
    op.add_column("jobs", sa.Column("concurrency_key", sa.Text))
    op.add_column("jobs", sa.Column("snoozes", sa.Integer, nullable=False, server_default="0"))
    op.create_check_constraint("jobs_priority_check", "jobs", "priority BETWEEN -100 AND 100")
    op.create_check_constraint("jobs_snoozes_check", "jobs", "snoozes >= 0")
    # The claim walks the queued range in its ORDER BY (priority DESC, created_at, id).
    op.drop_index("jobs_queue_idx", table_name="jobs")
    op.create_index(
        "jobs_queue_idx",
        "jobs",
        ["status", sa.text("priority DESC"), "created_at", "id"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    # Running jobs per (type, key): what a limited claim counts.
    op.create_index(
        "jobs_running_key_idx",
        "jobs",
        ["type", "concurrency_key"],
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_table(
        "job_workers",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("types", ARRAY(sa.Text), nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("started_at", TZ, nullable=False),
        sa.Column("last_seen_at", TZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_workers")
    op.drop_index("jobs_running_key_idx", table_name="jobs")
    op.drop_index("jobs_queue_idx", table_name="jobs")
    op.create_index(
        "jobs_queue_idx",
        "jobs",
        ["status", "created_at", "id"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    op.drop_constraint("jobs_snoozes_check", "jobs")
    op.drop_constraint("jobs_priority_check", "jobs")
    op.drop_column("jobs", "snoozes")
    op.drop_column("jobs", "concurrency_key")
    op.drop_column("jobs", "priority")
