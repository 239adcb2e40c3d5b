"""linkcheck_crawls and linkcheck_results.

Revision ID: 0001_linkcheck
Revises:
Create Date: 2026-12-03

A migration is a frozen snapshot: it spells the tables out rather than importing
``jobs_linkcheck.tables`` (which moves on with later revisions); a test checks that the migrated
database and the tables module agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID

revision: str = "0001_linkcheck"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "linkcheck_crawls",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("site", sa.Text, nullable=False),
        sa.Column("start_url", sa.Text, nullable=False),
        sa.Column("max_pages", sa.Integer, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'queued'")),
        sa.Column("pages", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("broken", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("error", sa.Text),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("finished_at", TZ),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'done', 'failed', 'cancelled')",
            name="linkcheck_crawls_status_check",
        ),
    )
    op.create_index(
        "linkcheck_crawls_org_site_idx", "linkcheck_crawls", ["org_id", "site", "created_at"]
    )
    op.create_table(
        "linkcheck_results",
        sa.Column(
            "crawl_id",
            UUID(as_uuid=True),
            sa.ForeignKey(
                "linkcheck_crawls.id", ondelete="CASCADE", name="linkcheck_results_crawl_id_fkey"
            ),
            nullable=False,
        ),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.Text),
        sa.Column("location", sa.Text),
        sa.Column("links", JSONB),
        sa.Column("fetched_at", TZ),
        sa.PrimaryKeyConstraint("crawl_id", "url", name="linkcheck_results_pkey"),
    )


def downgrade() -> None:
    op.drop_table("linkcheck_results")
    op.drop_table("linkcheck_crawls")
