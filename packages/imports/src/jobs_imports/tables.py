"""The Imports module's own tables, as SQLAlchemy Core: the single definition the code imports.

The module's Alembic chain (``jobs_imports/migrations``) creates exactly these; a test compares
the migrated database with this metadata so the two cannot drift apart. The tables never
reference the ``jobs`` table by a foreign key: a job row may be deleted (a finished
``import_csv``), the import keeps the id it was run by.

Keys that carry the module's guarantees:

- ``import_rows`` PRIMARY KEY ``(import_id, line_no)``: a record of a file is one row, whatever
  the number of runs — a resumed import re-inserts nothing (``ON CONFLICT DO NOTHING``);
- ``import_rows`` UNIQUE ``(import_id, row_key)``: ``row_key`` hashes the record's dimensions
  (url, query, date, country, device); a record repeating an earlier one of the same file is
  skipped instead of counting its clicks twice;
- ``pages`` UNIQUE ``(site_target_id, normalized_url)``: one page per normalized URL, the key
  ``map_reconcile`` joins on; the partial index ``import_rows_unmapped_idx`` holds exactly the
  rows that still wait for a page, so a reconcile touches only those.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Date,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID

metadata = MetaData()

TIMESTAMPTZ = TIMESTAMP(timezone=True)

site_targets = Table(
    "site_targets",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("base_url", Text, nullable=False),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    UniqueConstraint("org_id", "base_url", name="site_targets_org_base_url_key"),
    Index("site_targets_org_created_idx", "org_id", "created_at"),
)
"""A site whose search data is imported: its base URL resolves the relative URLs of exports."""

pages = Table(
    "pages",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column(
        "site_target_id",
        UUID(as_uuid=True),
        ForeignKey("site_targets.id", ondelete="CASCADE", name="pages_site_target_id_fkey"),
        nullable=False,
    ),
    Column("url", Text, nullable=False),
    Column("normalized_url", Text, nullable=False),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    UniqueConstraint("site_target_id", "normalized_url", name="pages_target_url_key"),
)
"""The page inventory of a site target (loaded now, filled by the crawler later)."""

imports = Table(
    "imports",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("org_id", Text, nullable=False),
    Column(
        "site_target_id",
        UUID(as_uuid=True),
        ForeignKey("site_targets.id", ondelete="CASCADE", name="imports_site_target_id_fkey"),
        nullable=False,
    ),
    Column("kind", Text, nullable=False, server_default=text("'csv'")),
    Column("file_path", Text, nullable=False),
    Column("file_sha256", Text, nullable=False),
    Column("file_size", BigInteger, nullable=False),
    Column("original_name", Text),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("job_id", UUID(as_uuid=True)),
    Column("rows_read", BigInteger, nullable=False, server_default=text("0")),
    Column("rows_inserted", BigInteger, nullable=False, server_default=text("0")),
    Column("rows_skipped", BigInteger, nullable=False, server_default=text("0")),
    Column("rows_errors", BigInteger, nullable=False, server_default=text("0")),
    Column("report", JSONB),
    Column("error", Text),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("started_at", TIMESTAMPTZ),
    Column("finished_at", TIMESTAMPTZ),
    Column("date_from", Date),
    Column("date_to", Date),
    CheckConstraint("kind IN ('csv', 'api')", name="imports_kind_check"),
    CheckConstraint(
        "status IN ('pending', 'running', 'done', 'failed', 'cancelled')",
        name="imports_status_check",
    ),
    CheckConstraint(
        "rows_read >= 0 AND rows_inserted >= 0 AND rows_skipped >= 0 AND rows_errors >= 0",
        name="imports_counts_check",
    ),
    Index("imports_org_target_created_idx", "org_id", "site_target_id", "created_at"),
    # an upload's content already imported for the site target (ImportsService.create_import)
    Index("imports_org_target_sha_idx", "org_id", "site_target_id", "file_sha256"),
    # the active API import of a date range (jobs_imports.api_sources.ApiSources.start_import)
    Index(
        "imports_org_target_range_idx",
        "org_id",
        "site_target_id",
        "date_from",
        "date_to",
        postgresql_where=text("kind = 'api'"),
    ),
)
"""One import: an uploaded file (``kind`` csv) or a date range fetched from the site target's
API source (``kind`` api: ``date_from``/``date_to``, no file: empty path and hash, size 0); its
status and its counts (``report`` holds the first errors)."""

import_api_sources = Table(
    "import_api_sources",
    metadata,
    Column(
        "site_target_id",
        UUID(as_uuid=True),
        ForeignKey(
            "site_targets.id", ondelete="CASCADE", name="import_api_sources_site_target_id_fkey"
        ),
        primary_key=True,
    ),
    Column("org_id", Text, nullable=False),
    Column("base_url", Text, nullable=False),
    Column("token", Text, nullable=False),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
)
"""The search-analytics API of a site target: its base URL and the bearer token ``import_api``
sends. The token is a secret: only the worker reads it; nothing shows it (decision 0035)."""

import_rows = Table(
    "import_rows",
    metadata,
    Column(
        "import_id",
        UUID(as_uuid=True),
        ForeignKey("imports.id", ondelete="CASCADE", name="import_rows_import_id_fkey"),
        nullable=False,
    ),
    Column("line_no", Integer, nullable=False),
    Column("site_target_id", UUID(as_uuid=True), nullable=False),
    Column("row_key", UUID(as_uuid=True), nullable=False),
    Column("url", Text, nullable=False),
    Column("normalized_url", Text, nullable=False),
    Column("query", Text),
    Column("date", Date),
    Column("country", Text),
    Column("device", Text),
    Column("clicks", BigInteger),
    Column("impressions", BigInteger),
    Column("ctr", Float),
    Column("position", Float),
    Column(
        "page_id",
        BigInteger,
        ForeignKey("pages.id", ondelete="SET NULL", name="import_rows_page_id_fkey"),
    ),
    PrimaryKeyConstraint("import_id", "line_no", name="import_rows_pkey"),
    UniqueConstraint("import_id", "row_key", name="import_rows_import_row_key_key"),
    Index(
        "import_rows_unmapped_idx",
        "site_target_id",
        "normalized_url",
        postgresql_where=text("page_id IS NULL"),
    ),
    Index("import_rows_page_idx", "page_id", postgresql_where=text("page_id IS NOT NULL")),
)
"""The records of imported search-analytics files; ``page_id`` is NULL until mapped."""
