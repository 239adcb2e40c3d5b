"""The claim and the finish write their own events; the update trigger no longer fires for them
(decision 0013, "The claim and the finish log themselves").

Revision ID: 0009_hot_path_log
Revises: 0008_lighter_writes
Create Date: 2026-12-03

The statement-level update trigger of migration 0002 compared every changed row with its old
version through ``jobs_event_kind`` (a SQL function of two whole rows) and the join of the
transition tables: on a quiet box, half the database's work per job of a drain. The statements
of the drain already know what they do: a claim is ``claimed``, a finish is its status (or
``requeued``). They now insert their events in a CTE of the same statement (``jobs_postgres.sql``,
``_LOG_CLAIMED`` / ``_LOG_FINISHED``), and the update trigger becomes a row-level trigger that
fires only for an ``UPDATE`` whose SET list names a column neither of them writes (``UPDATE OF``
below; PostgreSQL allows no column list on a trigger with transition tables): progress writes,
cancellation requests, the admin transitions (``SAVE``); its ``WHEN`` clause skips a heartbeat
before any function runs. The insert and delete triggers are unchanged.

The rule for a new statement that updates ``jobs``: it names one of these columns, or it writes
its own events like the claim and the finish.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009_hot_path_log"
down_revision: str | None = "0008_lighter_writes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every column of ``jobs`` except those the claim (status, attempts, started_at, heartbeat_at,
# lease, dedup_key) and the finish (status, attempts, snoozes, run_at, error, report,
# finished_at, dedup_key, hook_due_at, lease) write.
TRIGGERING_COLUMNS = (
    "id, org_id, type, payload, progress, created_at, max_attempts, dedup_scope, "
    "requested_dedup_key, cancel_requested_at, priority, concurrency_key, checkpoint"
)


# One row of the log for one changed row (the kind is known not NULL: the trigger's WHEN).
ROW_FUNCTION = """
CREATE FUNCTION jobs_log_update_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    VALUES (NEW.org_id, NEW.id, jobs_event_kind(OLD, NEW),
            to_jsonb(NEW) - ARRAY['lease', 'hook_due_at', 'checkpoint']);
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.execute("DROP TRIGGER jobs_log_update ON jobs")
    op.execute(ROW_FUNCTION)
    op.execute(
        f"CREATE TRIGGER jobs_log_update AFTER UPDATE OF {TRIGGERING_COLUMNS} ON jobs "
        "FOR EACH ROW WHEN (jobs_event_kind(OLD, NEW) IS NOT NULL) "
        "EXECUTE FUNCTION jobs_log_update_row()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER jobs_log_update ON jobs")
    op.execute("DROP FUNCTION jobs_log_update_row()")
    op.execute(
        "CREATE TRIGGER jobs_log_update AFTER UPDATE ON jobs "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION jobs_log_update()"
    )
