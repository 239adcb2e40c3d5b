"""Children: the job whose handler enqueued this one (decision 0038).

Revision ID: 0013_job_parent
Revises: 0011_org_quotas
Create Date: 2026-12-05

``jobs.parent_id`` is set by ``ctx.enqueue`` only (same org), NULL for every other job. A
nullable column without a default: adding it rewrites no row, and the writes that do not set it
(every enqueue but a child's, every claim and finish) are unchanged. No foreign key: a parent
may be deleted (retention, ``jobs rm``) before its children.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013_job_parent"
down_revision: str | None = "0012_job_attempts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column."""
    op.execute("ALTER TABLE jobs ADD COLUMN parent_id uuid")


def downgrade() -> None:
    """Drop it (the children stay, as jobs without a parent)."""
    op.execute("ALTER TABLE jobs DROP COLUMN parent_id")
