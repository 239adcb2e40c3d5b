"""Imports: a cancelled status, and the lookup of an upload by its content (issue 26).

Revision ID: 0002_imports
Revises: 0001_imports
Create Date: 2026-12-05

- ``imports.status`` may be ``cancelled`` (the ``import_csv`` job's ``on_cancel`` hook writes it);
- ``imports_org_target_sha_idx``: the imports of a site target with a given SHA-256, which an
  upload looks up to return the existing import of the same content instead of a second one;
- the view ``site_search_rows``: a site target's search data as one consistent set, one row per
  record key (url, query, date, country, device) from its most recent done import.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002_imports"
down_revision: str | None = "0001_imports"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_constraint("imports_status_check", "imports", type_="check")
    op.create_check_constraint(
        "imports_status_check",
        "imports",
        "status IN ('pending', 'running', 'done', 'failed', 'cancelled')",
    )
    op.create_index(
        "imports_org_target_sha_idx", "imports", ["org_id", "site_target_id", "file_sha256"]
    )
    op.execute(
        """
CREATE VIEW site_search_rows AS
SELECT DISTINCT ON (r.site_target_id, r.row_key)
       i.org_id, r.site_target_id, r.row_key, r.url, r.normalized_url, r.query, r.date,
       r.country, r.device, r.clicks, r.impressions, r.ctr, r.position, r.page_id,
       r.import_id, i.created_at AS imported_at
FROM import_rows AS r
JOIN imports AS i ON i.id = r.import_id
WHERE i.status = 'done'
ORDER BY r.site_target_id, r.row_key, i.created_at DESC, i.id DESC
"""
    )


def downgrade() -> None:
    op.execute("DROP VIEW site_search_rows")
    op.drop_index("imports_org_target_sha_idx", table_name="imports")
    op.execute("UPDATE imports SET status = 'failed' WHERE status = 'cancelled'")
    op.drop_constraint("imports_status_check", "imports", type_="check")
    op.create_check_constraint(
        "imports_status_check", "imports", "status IN ('pending', 'running', 'done', 'failed')"
    )
