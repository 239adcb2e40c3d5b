"""The index of the fair claim: queued jobs per org in claim order (decision 0015, "Fairness
between orgs").

Revision ID: 0005_fair_claim
Revises: 0004_schedules_retention
Create Date: 2026-12-03

Touches only its own object: one partial index on ``jobs`` (queued rows only, so it stays the
size of the queue). Built with a plain CREATE INDEX inside the migration's transaction, which
blocks writes to ``jobs`` while it builds: on a large live queue, build it first by hand with
``CREATE INDEX CONCURRENTLY jobs_org_queue_idx ON jobs (org_id, priority DESC, created_at, id)
WHERE status = 'queued'`` and this migration skips it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005_fair_claim"
down_revision: str | None = "0004_schedules_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS jobs_org_queue_idx ON jobs "
        "(org_id, priority DESC, created_at, id) WHERE status = 'queued'"
    )


def downgrade() -> None:
    op.drop_index("jobs_org_queue_idx", table_name="jobs")
