"""The module's own tables, in its own Alembic chain (:mod:`jobs_linkcheck.migrations`).

- ``linkcheck_crawls``: one row per crawl, keyed by the id of the ``linkcheck_crawl`` job that
  runs it; its ``status`` is the domain's view of that job (queued, running, done, failed,
  cancelled), kept true by the handler and the job type's hooks.
- ``linkcheck_results``: one row per URL a crawl handed to a fetch job. The row is written in
  the same transaction as that job's enqueue, so "a row exists" means "a fetch job exists or
  ran": a crawl that resumes after a crash never enqueues a URL twice. ``fetched_at`` is set
  when the fetch job records what it found (``links``: the same-site links of the page).

No foreign key points at ``jobs``: the module's chain runs after the jobs chain, and the two
evolve independently (decision 0004).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID

metadata = sa.MetaData()

CRAWL_STATUSES = ("queued", "running", "done", "failed", "cancelled")

crawls = sa.Table(
    "linkcheck_crawls",
    metadata,
    sa.Column("id", UUID(as_uuid=True), primary_key=True),
    sa.Column("org_id", sa.Text, nullable=False),
    sa.Column("site", sa.Text, nullable=False),
    sa.Column("start_url", sa.Text, nullable=False),
    sa.Column("max_pages", sa.Integer, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default=sa.text("'queued'")),
    sa.Column("pages", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("broken", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("error", sa.Text),
    sa.Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.Column("finished_at", TIMESTAMP(timezone=True)),
    sa.CheckConstraint(
        "status IN ('queued', 'running', 'done', 'failed', 'cancelled')",
        name="linkcheck_crawls_status_check",
    ),
    sa.Index("linkcheck_crawls_org_site_idx", "org_id", "site", "created_at"),
)

results = sa.Table(
    "linkcheck_results",
    metadata,
    sa.Column(
        "crawl_id",
        UUID(as_uuid=True),
        sa.ForeignKey(
            "linkcheck_crawls.id", ondelete="CASCADE", name="linkcheck_results_crawl_id_fkey"
        ),
        primary_key=True,
    ),
    sa.Column("url", sa.Text, primary_key=True),
    sa.Column("status_code", sa.Integer),
    sa.Column("error", sa.Text),
    sa.Column("location", sa.Text),
    sa.Column("links", JSONB),
    sa.Column("fetched_at", TIMESTAMP(timezone=True)),
)
