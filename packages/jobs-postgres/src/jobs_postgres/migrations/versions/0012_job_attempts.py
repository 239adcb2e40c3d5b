"""Every attempt of a job (issue 24).

Revision ID: 0012_job_attempts
Revises: 0011_org_quotas
Create Date: 2026-12-05

``job_attempts`` keeps one row per ended attempt, keyed by ``(job_id, attempt)``; the finish
writes it in the statement that writes the outcome. It goes with its job (``ON DELETE CASCADE``).
The jobs that ended before this revision have no rows: their last error stays on the job.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012_job_attempts"
down_revision: str | None = "0011_org_quotas"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table."""
    op.execute(
        """CREATE TABLE job_attempts (
            job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            attempt integer NOT NULL,
            started_at timestamptz NOT NULL,
            ended_at timestamptz NOT NULL,
            worker text,
            outcome text NOT NULL,
            error text,
            traceback text,
            CONSTRAINT job_attempts_pkey PRIMARY KEY (job_id, attempt),
            CONSTRAINT job_attempts_outcome_check CHECK (outcome IN (
                'done', 'failed', 'cancelled', 'retrying', 'snoozed', 'handed_back', 'lost'
            ))
        )"""
    )


def downgrade() -> None:
    """Drop it (the history of the attempts is lost; the jobs keep their last error)."""
    op.execute("DROP TABLE job_attempts")
