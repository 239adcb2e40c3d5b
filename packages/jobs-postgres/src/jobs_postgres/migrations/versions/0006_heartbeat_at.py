"""A real heartbeat column: ``jobs.heartbeat_at`` (decision 0020).

Revision ID: 0006_heartbeat_at
Revises: 0005_fair_claim
Create Date: 2026-12-03

The sweep used to read a running job's last sign of life out of its progress document
(``progress->>'updated_at'``, checked against a regular expression before the cast). The
claim, every heartbeat and every progress save now write ``heartbeat_at`` as well, and the sweep
reads that column. ``progress.updated_at`` is still written: it is part of the public job
document (docs/contract.md §1).

The backfill gives every row the value the sweep read before: the later of its
``progress.updated_at`` (only when it has the shape the store writes, an ISO 8601 instant with
an offset) and its ``started_at``. Adding a nullable column without a default rewrites nothing;
the backfill updates the rows once (in one transaction with the column: on a very large
history, run it by hand in batches first, ``WHERE heartbeat_at IS NULL``, and this migration
finds little left to do).

``jobs_event_kind`` (migration 0002_events) is replaced so that a heartbeat, which now also
moves ``heartbeat_at``, is still no event.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TIMESTAMP

revision: str = "0006_heartbeat_at"
down_revision: str | None = "0005_fair_claim"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ISO_INSTANT = r"^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?([+-]\d\d:\d\d|Z)$"

BACKFILL = f"""
UPDATE jobs SET heartbeat_at = greatest(
    CASE WHEN progress->>'updated_at' ~ '{ISO_INSTANT}'
         THEN (progress->>'updated_at')::timestamptz
    END,
    started_at
)
WHERE heartbeat_at IS NULL AND (started_at IS NOT NULL OR progress ? 'updated_at')
"""


def _kind_function(ignored: str) -> str:
    """``jobs_event_kind`` of migration 0002_events, the columns ``ignored`` (a SQL list of
    text literals subtracted from the row's JSON) left out of the last test."""
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
        WHEN (to_jsonb(o) - {ignored}) IS DISTINCT FROM (to_jsonb(n) - {ignored})
             THEN 'updated'
    END
$$
"""


def upgrade() -> None:
    op.add_column("jobs", sa.Column("heartbeat_at", TIMESTAMP(timezone=True), nullable=True))
    op.execute(BACKFILL)
    op.execute(_kind_function("ARRAY['progress', 'heartbeat_at']"))


def downgrade() -> None:
    op.execute(_kind_function("'progress'"))
    op.drop_column("jobs", "heartbeat_at")
