"""The jobs table (docs/contract.md §1), api_tokens, and uuidv7() before PG 18.

Revision ID: 0001_jobs
Revises:
Create Date: 2026-12-02

A migration is a frozen snapshot: it spells the tables out rather than importing
``jobs_postgres.schema`` (which moves on with later revisions). A test checks that the migrated
database and the schema module agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID

revision: str = "0001_jobs"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = TIMESTAMP(timezone=True)

# PostgreSQL 18 has uuidv7() built in; before it, this SQL one gives the same layout (RFC 9562:
# 48-bit Unix milliseconds, version 7, variant 10, random rest) so the column default is the same
# everywhere. The version nibble 0100 of a v4 UUID becomes 0111 by setting bits 52 and 53 (in
# set_bit's least-significant-first numbering of byte 6).
UUIDV7 = """
CREATE FUNCTION uuidv7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
    SELECT encode(
        set_bit(
            set_bit(
                overlay(
                    uuid_send(gen_random_uuid())
                    PLACING substring(
                        int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                        FROM 3
                    )
                    FROM 1 FOR 6
                ),
                52, 1
            ),
            53, 1
        ),
        'hex'
    )::uuid
$$
"""
UUIDV7_COMMENT = "uuidv7() for PostgreSQL < 18, created by the jobs-postgres migration"


def _server_version() -> int:
    return int(op.get_bind().execute(sa.text("SHOW server_version_num")).scalar_one())


def upgrade() -> None:
    if _server_version() < 180000:
        exists = op.get_bind().execute(sa.text("SELECT to_regprocedure('uuidv7()')")).scalar()
        if exists is None:
            op.execute(UUIDV7)
            op.execute(f"COMMENT ON FUNCTION uuidv7() IS '{UUIDV7_COMMENT}'")

    op.create_table(
        "jobs",
        sa.Column("id", UUID(as_uuid=True), primary_key=True, server_default=sa.text("uuidv7()")),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'queued'")),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("dedup_key", sa.Text),
        sa.Column("payload", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("progress", JSONB),
        sa.Column("report", JSONB),
        sa.Column("error", sa.Text),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("started_at", TZ),
        sa.Column("finished_at", TZ),
        sa.Column("run_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("max_attempts", sa.Integer, nullable=False, server_default=sa.text("3")),
        sa.Column("dedup_scope", sa.Text, nullable=False, server_default=sa.text("'queue'")),
        sa.Column("requested_dedup_key", sa.Text),
        sa.Column("cancel_requested_at", TZ),
        sa.Column("lease", UUID(as_uuid=True)),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'done', 'failed', 'cancelled')",
            name="jobs_status_check",
        ),
        sa.CheckConstraint("dedup_scope IN ('queue', 'active')", name="jobs_dedup_scope_check"),
        sa.CheckConstraint("attempts >= 0", name="jobs_attempts_check"),
        sa.CheckConstraint("max_attempts >= 1", name="jobs_max_attempts_check"),
        sa.UniqueConstraint("org_id", "dedup_key", name="jobs_org_dedup_key_key"),
        # Why these values: see JOBS_STORAGE in jobs_postgres/schema.py (HOT updates, vacuum
        # that keeps up with a high-churn queue).
        postgresql_with={
            "fillfactor": "70",
            "autovacuum_vacuum_scale_factor": "0.01",
            "autovacuum_vacuum_threshold": "1000",
            "autovacuum_analyze_scale_factor": "0.02",
            "autovacuum_vacuum_insert_scale_factor": "0.05",
        },
    )
    op.create_index(
        "jobs_org_type_created_idx",
        "jobs",
        ["org_id", "type", sa.text("created_at DESC"), sa.text("id DESC")],
    )
    op.create_index(
        "jobs_org_created_idx", "jobs", ["org_id", sa.text("created_at DESC"), sa.text("id DESC")]
    )
    op.create_index(
        "jobs_queue_idx",
        "jobs",
        ["status", "created_at", "id"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )

    op.create_table(
        "api_tokens",
        sa.Column("id", UUID(as_uuid=True), primary_key=True, server_default=sa.text("uuidv7()")),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("token_hash", sa.Text, nullable=False),
        sa.Column("label", sa.Text),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("revoked_at", TZ),
        sa.UniqueConstraint("token_hash", name="api_tokens_token_hash_key"),
    )
    op.create_index("api_tokens_org_idx", "api_tokens", ["org_id", "created_at"])


def downgrade() -> None:
    op.drop_table("api_tokens")
    op.drop_table("jobs")
    # Drop uuidv7() only if this migration made it (never PostgreSQL 18's built-in one, nor a
    # function of the same name someone else installed).
    op.execute(
        f"""
        DO $$
        BEGIN
            IF obj_description(to_regprocedure('uuidv7()'), 'pg_proc') = '{UUIDV7_COMMENT}' THEN
                DROP FUNCTION uuidv7();
            END IF;
        END
        $$
        """
    )
