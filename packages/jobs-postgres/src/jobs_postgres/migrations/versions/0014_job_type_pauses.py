"""Paused job types (issue 24, decision 0039).

Revision ID: 0014_job_type_pauses
Revises: 0013_job_parent
Create Date: 2026-12-07

``job_type_pauses`` holds one row per paused type (``jobs pause``, ``POST
/job-types/{name}/pause``). Every claim reads it as one array built once per statement (an
InitPlan over a table of a few rows at most): a paused type's queued jobs stay queued. Nothing
of ``jobs`` changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014_job_type_pauses"
down_revision: str | None = "0013_job_parent"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table."""
    op.execute(
        """CREATE TABLE job_type_pauses (
            type text PRIMARY KEY,
            paused_at timestamptz NOT NULL,
            paused_by text NOT NULL
        )"""
    )


def downgrade() -> None:
    """Drop it (every paused type runs again)."""
    op.execute("DROP TABLE job_type_pauses")
