"""Imports: API sources per site target, and the date range of an API import (issue 26 item 1).

Revision ID: 0003_imports
Revises: 0002_imports
Create Date: 2026-12-05

- ``import_api_sources``: one search-analytics API per site target (its base URL and the bearer
  token ``import_api`` sends); the token is read by the worker only, never shown;
- ``imports.date_from`` / ``imports.date_to``: the date range an ``api`` import asked for (NULL
  for a CSV upload), and the index that finds the active API import of a range;
- ``imports.kind`` is ``csv`` or ``api``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TIMESTAMP, UUID

revision: str = "0003_imports"
down_revision: str | None = "0002_imports"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "import_api_sources",
        sa.Column(
            "site_target_id",
            UUID(as_uuid=True),
            sa.ForeignKey(
                "site_targets.id", ondelete="CASCADE", name="import_api_sources_site_target_id_fkey"
            ),
            primary_key=True,
        ),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("base_url", sa.Text, nullable=False),
        sa.Column("token", sa.Text, nullable=False),
        sa.Column(
            "updated_at", TIMESTAMP(timezone=True), nullable=False, server_default=sa.text("now()")
        ),
    )
    op.add_column("imports", sa.Column("date_from", sa.Date))
    op.add_column("imports", sa.Column("date_to", sa.Date))
    op.create_check_constraint("imports_kind_check", "imports", "kind IN ('csv', 'api')")
    op.create_index(
        "imports_org_target_range_idx",
        "imports",
        ["org_id", "site_target_id", "date_from", "date_to"],
        postgresql_where=sa.text("kind = 'api'"),
    )


def downgrade() -> None:
    op.execute("DELETE FROM imports WHERE kind = 'api'")
    op.drop_index("imports_org_target_range_idx", table_name="imports")
    op.drop_constraint("imports_kind_check", "imports", type_="check")
    op.drop_column("imports", "date_to")
    op.drop_column("imports", "date_from")
    op.drop_table("import_api_sources")
