"""site_targets, pages, imports and import_rows (decision 0007).

Revision ID: 0001_imports
Revises:
Create Date: 2026-12-02

A migration is a frozen snapshot: it spells the tables out rather than importing
``jobs_imports.tables`` (which moves on with later revisions). A test checks that the migrated
database and the tables module agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID

revision: str = "0001_imports"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "site_targets",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("base_url", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.UniqueConstraint("org_id", "base_url", name="site_targets_org_base_url_key"),
    )
    op.create_index("site_targets_org_created_idx", "site_targets", ["org_id", "created_at"])

    op.create_table(
        "pages",
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
        sa.Column(
            "site_target_id",
            UUID(as_uuid=True),
            sa.ForeignKey("site_targets.id", ondelete="CASCADE", name="pages_site_target_id_fkey"),
            nullable=False,
        ),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("normalized_url", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.UniqueConstraint("site_target_id", "normalized_url", name="pages_target_url_key"),
    )

    op.create_table(
        "imports",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column(
            "site_target_id",
            UUID(as_uuid=True),
            sa.ForeignKey(
                "site_targets.id", ondelete="CASCADE", name="imports_site_target_id_fkey"
            ),
            nullable=False,
        ),
        sa.Column("kind", sa.Text, nullable=False, server_default=sa.text("'csv'")),
        sa.Column("file_path", sa.Text, nullable=False),
        sa.Column("file_sha256", sa.Text, nullable=False),
        sa.Column("file_size", sa.BigInteger, nullable=False),
        sa.Column("original_name", sa.Text),
        sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'pending'")),
        sa.Column("job_id", UUID(as_uuid=True)),
        sa.Column("rows_read", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("rows_inserted", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("rows_skipped", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("rows_errors", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("report", JSONB),
        sa.Column("error", sa.Text),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.Column("started_at", TZ),
        sa.Column("finished_at", TZ),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'done', 'failed')", name="imports_status_check"
        ),
        sa.CheckConstraint(
            "rows_read >= 0 AND rows_inserted >= 0 AND rows_skipped >= 0 AND rows_errors >= 0",
            name="imports_counts_check",
        ),
    )
    op.create_index(
        "imports_org_target_created_idx", "imports", ["org_id", "site_target_id", "created_at"]
    )

    op.create_table(
        "import_rows",
        sa.Column(
            "import_id",
            UUID(as_uuid=True),
            sa.ForeignKey("imports.id", ondelete="CASCADE", name="import_rows_import_id_fkey"),
            nullable=False,
        ),
        sa.Column("line_no", sa.Integer, nullable=False),
        sa.Column("site_target_id", UUID(as_uuid=True), nullable=False),
        sa.Column("row_key", UUID(as_uuid=True), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("normalized_url", sa.Text, nullable=False),
        sa.Column("query", sa.Text),
        sa.Column("date", sa.Date),
        sa.Column("country", sa.Text),
        sa.Column("device", sa.Text),
        sa.Column("clicks", sa.BigInteger),
        sa.Column("impressions", sa.BigInteger),
        sa.Column("ctr", sa.Float),
        sa.Column("position", sa.Float),
        sa.Column(
            "page_id",
            sa.BigInteger,
            sa.ForeignKey("pages.id", ondelete="SET NULL", name="import_rows_page_id_fkey"),
        ),
        sa.PrimaryKeyConstraint("import_id", "line_no", name="import_rows_pkey"),
        sa.UniqueConstraint("import_id", "row_key", name="import_rows_import_row_key_key"),
    )
    op.create_index(
        "import_rows_unmapped_idx",
        "import_rows",
        ["site_target_id", "normalized_url"],
        postgresql_where=sa.text("page_id IS NULL"),
    )
    op.create_index(
        "import_rows_page_idx",
        "import_rows",
        ["page_id"],
        postgresql_where=sa.text("page_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_table("import_rows")
    op.drop_table("imports")
    op.drop_table("pages")
    op.drop_table("site_targets")
