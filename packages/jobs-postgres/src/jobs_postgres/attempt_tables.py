"""The table of every attempt of every job (revision ``0012_job_attempts``, issue 24), on the
same :data:`jobs_postgres.schema.metadata` as ``jobs``.

One row per ended attempt, keyed by ``(job_id, attempt)``: written by the finish in the same
statement as the outcome (``jobs_postgres.claims``), so no write gets a round trip more; the
key's index serves both the read of a job's attempts and the next number. Deleted with its job
(``ON DELETE CASCADE``: a user's delete and retention's batches take them, through that index).
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    ForeignKey,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import UUID

from jobs_postgres.schema import TIMESTAMPTZ, metadata

ATTEMPT_OUTCOMES = (
    "done",
    "failed",
    "cancelled",
    "retrying",
    "snoozed",
    "handed_back",
    "lost",
    "waiting",
)
"""The values of ``outcome`` (``jobs_core.history.AttemptOutcome``, checked by a test)."""

job_attempts = Table(
    "job_attempts",
    metadata,
    Column("job_id", UUID(as_uuid=True), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("started_at", TIMESTAMPTZ, nullable=False),
    Column("ended_at", TIMESTAMPTZ, nullable=False),
    Column("worker", Text),
    Column("outcome", Text, nullable=False),
    Column("error", Text),
    Column("traceback", Text),
    PrimaryKeyConstraint("job_id", "attempt", name="job_attempts_pkey"),
    CheckConstraint(
        "outcome IN (" + ", ".join(f"'{o}'" for o in ATTEMPT_OUTCOMES) + ")",
        name="job_attempts_outcome_check",
    ),
)

# A job's records are read by jobs_postgres.reads (ATTEMPTS, record_from_row).


# The gauges of the live jobs (jobs_core.observe.active_state; the API's /metrics reads it at
# scrape time). Indexes: jobs_queue_idx for the queued and running rows, jobs_waiting_idx for
# the waiting ones: each branch's WHERE is its partial index's predicate (one IN list of the
# three statuses implies neither, and 1,000,000 rows of history were then read in a parallel
# scan: 77 ms a scrape), so only the live rows are read, never the history; the cost grows with
# the live jobs, not with the finished ones.
ACTIVE_COUNTS = text(
    """SELECT type, state, count(*) FROM (
        SELECT type,
               CASE WHEN status = 'running' THEN 'running'
                    WHEN run_at > :now THEN 'scheduled' ELSE 'queued' END AS state
        FROM jobs WHERE status IN ('queued', 'running')
        UNION ALL
        SELECT type, 'waiting' FROM jobs WHERE status = 'waiting'
    ) AS live
    GROUP BY 1, 2"""
)
