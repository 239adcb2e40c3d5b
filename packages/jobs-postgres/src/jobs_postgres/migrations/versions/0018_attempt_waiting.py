"""A parent that waits for its children: the attempt that ends ``waiting`` (decision 0043).

Revision ID: 0018_attempt_waiting
Revises: 0016_job_waits
Create Date: 2026-12-07

- ``job_attempts.outcome`` gains ``waiting``: the attempt's handler ended it with
  ``ctx.wait_for_children()`` (``jobs_core.history.AttemptOutcome.WAITING``). The check is put
  back ``NOT VALID`` then validated: no row is rewritten, and the validation reads the table
  without blocking its writes.
- Nothing else: the parent's ``waiting`` status, its edges and their release are those of
  ``0016_job_waits``.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018_attempt_waiting"
down_revision: str | None = "0017_job_rate_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OUTCOMES = "'done', 'failed', 'cancelled', 'retrying', 'snoozed', 'handed_back', 'lost'"


def _check(outcomes: str) -> None:
    op.execute("ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_outcome_check")
    op.execute(
        "ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_outcome_check "
        f"CHECK (outcome IN ({outcomes})) NOT VALID"
    )
    op.execute("ALTER TABLE job_attempts VALIDATE CONSTRAINT job_attempts_outcome_check")


def upgrade() -> None:
    """Allow the outcome ``waiting``."""
    _check(f"{OUTCOMES}, 'waiting'")


def downgrade() -> None:
    """The records of waits become ``snoozed`` ones (an attempt handed back to run later)."""
    op.execute("UPDATE job_attempts SET outcome = 'snoozed' WHERE outcome = 'waiting'")
    _check(OUTCOMES)
