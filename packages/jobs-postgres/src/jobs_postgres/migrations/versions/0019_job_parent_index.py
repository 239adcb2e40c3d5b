"""The children of a job, found by an index: a parent's row in the panel expands to its
children, and each listed page counts them (decision 0045).

Revision ID: 0019_job_parent_index
Revises: 0018_attempt_waiting
Create Date: 2026-12-07

One partial index on ``jobs``: ``(parent_id) WHERE parent_id IS NOT NULL``. A job that is not a
child (every job but those of ``ctx.enqueue``) writes no entry in it, and since ``parent_id``
never changes after the insert, an update of a child stays a HOT update when it would have
been one (no indexed column changes).

Built as the earlier indexes of this chain are (``0004``, ``0005``): a plain ``CREATE INDEX``
inside the migration's transaction (the whole chain runs in one, under the migrators' advisory
lock, so ``CONCURRENTLY`` cannot run here). The build reads the whole table and blocks writes to
``jobs`` while it does: on a large live table, build it first by hand with ``CREATE INDEX
CONCURRENTLY jobs_parent_idx ON jobs (parent_id) WHERE parent_id IS NOT NULL`` and this
migration skips it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019_job_parent_index"
down_revision: str | None = "0018_attempt_waiting"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Index the children by their parent."""
    op.execute(
        "CREATE INDEX IF NOT EXISTS jobs_parent_idx ON jobs (parent_id) WHERE parent_id IS NOT NULL"
    )


def downgrade() -> None:
    """Drop it (nothing else depends on it)."""
    op.execute("DROP INDEX IF EXISTS jobs_parent_idx")
