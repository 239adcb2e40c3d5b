"""Lifecycle columns of ``jobs``: the due end hook and the private checkpoint (decision 0025).

Revision ID: 0007_private_checkpoint
Revises: 0005_fair_claim
Create Date: 2026-12-03

- ``hook_due_at``: when the end hook (``on_fail`` / ``on_cancel``) of a failed or cancelled job
  is due; set by the statement that ends the job, cleared by the worker that ran the hook.
  ``jobs_hook_due_idx`` holds only the rows with a hook pending.
- ``checkpoint``: the handler's private checkpoint, written with the progress document in one
  statement, given back to a later attempt, never shown by the API, the CLI or the event log.
- The event log's triggers (0002_events) leave both columns out of the job they log, and a change
  of only these columns is no visible change (no event).

Adding nullable columns without a default rewrites nothing; the index is built inside the
migration's transaction, on the (empty) set of rows with a hook pending.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007_private_checkpoint"
down_revision: str | None = "0005_fair_claim"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HIDDEN = "'lease' - 'hook_due_at' - 'checkpoint'"
"""What the event log leaves out of a job: the worker's fencing token and the private columns."""


def _kind_function(invisible: str) -> str:
    """``jobs_event_kind`` of 0002_events, with ``invisible`` the columns a change of which alone
    is no visible change."""
    return f"""
CREATE OR REPLACE FUNCTION jobs_event_kind(o jobs, n jobs) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN o.status = 'queued' AND n.status = 'running' THEN 'claimed'
        WHEN n.status <> o.status AND n.status IN ('done', 'failed', 'cancelled') THEN n.status
        WHEN n.status = 'queued' AND o.status <> 'queued' THEN 'requeued'
        WHEN n.status = 'running' AND o.cancel_requested_at IS NULL
             AND n.cancel_requested_at IS NOT NULL THEN 'cancel_requested'
        WHEN n.status = 'running' AND o.status = 'running'
             AND (o.progress - 'updated_at') IS DISTINCT FROM (n.progress - 'updated_at')
             THEN 'progress'
        WHEN (to_jsonb(o) - {invisible}) IS DISTINCT FROM (to_jsonb(n) - {invisible})
             THEN 'updated'
    END
$$
"""


def _trigger_functions(hidden: str) -> str:
    """The three trigger functions of 0002_events, logging ``to_jsonb(row) - hidden``."""
    return f"""
CREATE OR REPLACE FUNCTION jobs_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    SELECT n.org_id, n.id, 'enqueued', to_jsonb(n) - {hidden} FROM new_rows n ORDER BY n.id;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION jobs_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    SELECT c.org_id, c.id, c.kind, c.job
    FROM (
        SELECT n.org_id, n.id, jobs_event_kind(o, n) AS kind, to_jsonb(n) - {hidden} AS job
        FROM new_rows n JOIN old_rows o ON o.id = n.id
    ) c
    WHERE c.kind IS NOT NULL
    ORDER BY c.id;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION jobs_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    SELECT o.org_id, o.id, 'deleted', to_jsonb(o) - {hidden} FROM old_rows o ORDER BY o.id;
    RETURN NULL;
END
$$;
"""


def upgrade() -> None:
    op.execute("ALTER TABLE jobs ADD COLUMN hook_due_at timestamptz, ADD COLUMN checkpoint jsonb")
    op.execute(
        "CREATE INDEX IF NOT EXISTS jobs_hook_due_idx ON jobs (hook_due_at)"
        " WHERE hook_due_at IS NOT NULL"
    )
    op.execute(_kind_function("'progress' - 'hook_due_at' - 'checkpoint'"))
    op.execute(_trigger_functions(_HIDDEN))


def downgrade() -> None:
    op.execute(_trigger_functions("'lease'"))
    op.execute(_kind_function("'progress'"))
    op.drop_index("jobs_hook_due_idx", table_name="jobs")
    op.execute("ALTER TABLE jobs DROP COLUMN checkpoint, DROP COLUMN hook_due_at")
