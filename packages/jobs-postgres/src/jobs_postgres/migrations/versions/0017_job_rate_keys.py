"""Rate limits per key (issue 25 item 4, decision 0042).

Revision ID: 0017_job_rate_keys
Revises: 0016_job_waits
Create Date: 2026-12-07

- ``job_rate_keys``: one row per (type, key) of a rate-limited type that has started a job:
  ``starts``, the times of its most recent starts, newest first, at most the type's N
  (``jobs_core.rates``). Written only by a claim under a rate limit (in its admitting
  statement, with the keys' advisory locks held), read by it and by "why is this job
  waiting?". No other table or statement changes: a deployment without a rate-limited type
  never reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017_job_rate_keys"
down_revision: str | None = "0016_job_waits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the table."""
    op.execute(
        """CREATE TABLE job_rate_keys (
            type text NOT NULL,
            key text NOT NULL,
            starts timestamptz[] NOT NULL,
            CONSTRAINT job_rate_keys_pkey PRIMARY KEY (type, key)
        )"""
    )


def downgrade() -> None:
    """Drop it (the rate limits' windows start empty again)."""
    op.execute("DROP TABLE job_rate_keys")
