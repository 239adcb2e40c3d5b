"""Tracing: the trace context a job's enqueue hands to its worker (decision 0039).

Revision ID: 0015_job_trace_context
Revises: 0014_job_type_pauses
Create Date: 2026-12-07

``jobs.trace_context`` holds the W3C trace context (``{"traceparent": ..., "tracestate": ...}``)
of the span that created the job, written only with tracing on (``JOBS_TRACING=1``); the worker's
span of each attempt continues it. A nullable column without a default: adding it rewrites no
row, and with tracing off no statement writes it (the claim reads it back, NULL).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015_job_trace_context"
down_revision: str | None = "0014_job_type_pauses"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column."""
    op.execute("ALTER TABLE jobs ADD COLUMN trace_context jsonb")


def downgrade() -> None:
    """Drop it (queued jobs start new traces)."""
    op.execute("ALTER TABLE jobs DROP COLUMN trace_context")
