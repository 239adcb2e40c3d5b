"""Two indexes fewer on the write path of every job (the drain; decision 0013, bench/NOTES.md).

Revision ID: 0008_lighter_writes
Revises: 0006_heartbeat_at
Create Date: 2026-12-03

- ``jobs_running_key_idx`` goes: a claim under limits counts the running jobs per key and type
  through ``jobs_queue_idx``'s ``running`` range, which holds one row per busy slot of the
  workers; every claim wrote an entry into it, whether or not any type declares a limit.
- ``job_events_at_idx`` goes: the prune of the event log walks the primary key ``(xid, seq)``
  from its oldest row, which follows commit order, and stops at the first row not old enough;
  every change of a job wrote an entry into it.

Dropping an index takes a short exclusive lock on its table and needs no rebuild. The downgrade
builds both again (a plain CREATE INDEX: it blocks writes while it builds).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008_lighter_writes"
down_revision: str | None = "0006_heartbeat_at"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS jobs_running_key_idx")
    op.execute("DROP INDEX IF EXISTS job_events_at_idx")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS jobs_running_key_idx ON jobs (type, concurrency_key) "
        "WHERE status = 'running'"
    )
    op.execute("CREATE INDEX IF NOT EXISTS job_events_at_idx ON job_events (at)")
