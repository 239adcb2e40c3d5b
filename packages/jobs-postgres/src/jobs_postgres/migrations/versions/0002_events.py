"""The event log of job changes (its triggers and its state row) and the browser sessions.

Revision ID: 0002_events
Revises: 0001_jobs
Create Date: 2026-12-03

- ``job_events``: one row per visible change of a ``jobs`` row, written by three statement-level
  triggers on ``jobs`` (insert, update, delete), in the writer's own transaction: what
  ``GET /jobs/events`` streams and resumes from (docs/events.md, decision 0013). A change only
  of ``progress.updated_at`` (a heartbeat) writes nothing. The kind of a change mirrors
  ``jobs_core.events.change_kind``.
- ``job_events_state``: one row: the key of the opaque event ids (random, made here, shared by
  every API process of the database) and the horizon of the pruned log.
- ``api_sessions``: browser sessions opened with an API token (docs/sessions.md); only the
  SHA-256 of the session cookie is stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import BYTEA, TIMESTAMP, UUID

revision: str = "0002_events"
down_revision: str | None = "0001_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = TIMESTAMP(timezone=True)

# The kind of a change of one row, o -> n (jobs_core.events.change_kind, in SQL). NULL: no
# visible change (a heartbeat only moves progress.updated_at).
KIND_FUNCTION = """
CREATE FUNCTION jobs_event_kind(o jobs, n jobs) RETURNS text
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
        WHEN (to_jsonb(o) - 'progress') IS DISTINCT FROM (to_jsonb(n) - 'progress')
             THEN 'updated'
    END
$$
"""

# Statement-level triggers with transition tables: one INSERT ... SELECT per statement, however
# many rows it changed (a bulk enqueue, a claim of a batch). ``to_jsonb(row) - 'lease'``: the
# job as it is after the change (before it, for a delete), without the worker's fencing token.
TRIGGER_FUNCTIONS = """
CREATE FUNCTION jobs_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    SELECT n.org_id, n.id, 'enqueued', to_jsonb(n) - 'lease' FROM new_rows n ORDER BY n.id;
    RETURN NULL;
END
$$;
CREATE FUNCTION jobs_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    SELECT c.org_id, c.id, c.kind, c.job
    FROM (
        SELECT n.org_id, n.id, jobs_event_kind(o, n) AS kind, to_jsonb(n) - 'lease' AS job
        FROM new_rows n JOIN old_rows o ON o.id = n.id
    ) c
    WHERE c.kind IS NOT NULL
    ORDER BY c.id;
    RETURN NULL;
END
$$;
CREATE FUNCTION jobs_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (org_id, job_id, kind, job)
    SELECT o.org_id, o.id, 'deleted', to_jsonb(o) - 'lease' FROM old_rows o ORDER BY o.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_log_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_log_insert();
CREATE TRIGGER jobs_log_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_log_update();
CREATE TRIGGER jobs_log_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_log_delete();
"""


def upgrade() -> None:
    """Create the event log, its triggers, its state row and the sessions table."""
    op.execute(
        """
        CREATE TABLE job_events (
            xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
            seq bigint GENERATED ALWAYS AS IDENTITY,
            org_id text NOT NULL,
            job_id uuid NOT NULL,
            kind text NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            job jsonb NOT NULL,
            CONSTRAINT job_events_pkey PRIMARY KEY (xid, seq)
        ) WITH (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05)
        """
    )
    op.create_index("job_events_at_idx", "job_events", ["at"])
    op.create_table(
        "job_events_state",
        sa.Column("id", sa.SmallInteger, primary_key=True, server_default=sa.text("1")),
        sa.Column("id_key", BYTEA, nullable=False),
        sa.Column("horizon_xid", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("horizon_seq", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.CheckConstraint("id = 1", name="job_events_state_one_row"),
    )
    # 244 random bits from the server's strong random source (gen_random_uuid).
    op.execute(
        "INSERT INTO job_events_state (id, id_key) VALUES (1, decode(replace("
        "gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))"
    )
    op.execute(KIND_FUNCTION)
    op.execute(TRIGGER_FUNCTIONS)
    op.create_table(
        "api_sessions",
        sa.Column("id", UUID(as_uuid=True), primary_key=True, server_default=sa.text("uuidv7()")),
        sa.Column("session_hash", sa.Text, nullable=False),
        sa.Column(
            "token_id",
            UUID(as_uuid=True),
            sa.ForeignKey("api_tokens.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("ended_at", TZ),
        sa.UniqueConstraint("session_hash", name="api_sessions_session_hash_key"),
    )
    op.create_index("api_sessions_token_idx", "api_sessions", ["token_id"])


def downgrade() -> None:
    """Drop what upgrade created."""
    op.drop_table("api_sessions")
    op.execute("DROP TRIGGER jobs_log_insert ON jobs")
    op.execute("DROP TRIGGER jobs_log_update ON jobs")
    op.execute("DROP TRIGGER jobs_log_delete ON jobs")
    op.execute("DROP FUNCTION jobs_log_insert(), jobs_log_update(), jobs_log_delete()")
    op.execute("DROP FUNCTION jobs_event_kind(jobs, jobs)")
    op.drop_table("job_events_state")
    op.drop_table("job_events")
