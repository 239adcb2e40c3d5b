"""Jobs that wait for others: dependencies and batches (issue 25, decision 0041).

Revision ID: 0016_job_waits
Revises: 0015_job_trace_context
Create Date: 2026-12-07

- ``jobs.status`` gains ``waiting``: a job not claimable until the jobs it awaits have ended.
  Neither the queue index nor the per-org queue index holds waiting rows (their predicates name
  ``queued`` and ``running``): the claim never sees them. ``jobs_waiting_idx`` (type, only the
  waiting rows) serves the gauges.
- ``jobs.wait_rule`` (private, NULL for a job that awaits none): ``all_done`` or ``all_ended``
  (``jobs_core.waits.WaitRule``). ``jobs.has_waiters`` (private): another job awaits this one,
  so its end must be recorded. Both added with constant defaults: no row is rewritten.
- ``job_waits``: one row per (awaited, waiter), ``ended`` the status the awaited job ended in
  once a release pass took that end (NULL before): each edge ends once, so an awaited job
  retried and ended again is not counted twice. Deleted with its waiter.
- ``job_wait_ends``: the ends to release, appended by the trigger ``jobs_record_wait_end`` in
  the write that ends an awaited job (a finish, a sweep, a cancel, a release that cancels),
  taken once each by a release pass (``DELETE ... SKIP LOCKED``). The trigger's WHEN reads only
  the row: a write of a job nobody awaits pays that test and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016_job_waits"
down_revision: str | None = "0015_job_trace_context"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = "'waiting', 'queued', 'running', 'done', 'failed', 'cancelled'"
OLD_STATUSES = "'queued', 'running', 'done', 'failed', 'cancelled'"


def upgrade() -> None:
    """Add the status, the columns, the tables and the trigger."""
    op.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_status_check")
    op.execute(f"ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ({STATUSES}))")
    op.execute("ALTER TABLE jobs ADD COLUMN wait_rule text")
    op.execute(
        "ALTER TABLE jobs ADD CONSTRAINT jobs_wait_rule_check "
        "CHECK (wait_rule IN ('all_done', 'all_ended'))"
    )
    op.execute("ALTER TABLE jobs ADD COLUMN has_waiters boolean NOT NULL DEFAULT false")
    op.execute("CREATE INDEX jobs_waiting_idx ON jobs (type) WHERE status = 'waiting'")
    op.execute(
        """CREATE TABLE job_waits (
            awaited uuid NOT NULL,
            waiter uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            ord integer NOT NULL,
            ended text,
            CONSTRAINT job_waits_pkey PRIMARY KEY (awaited, waiter)
        )"""
    )
    op.execute("CREATE INDEX job_waits_waiter_idx ON job_waits (waiter, ord)")
    op.execute(
        """CREATE TABLE job_wait_ends (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            awaited uuid NOT NULL,
            status text NOT NULL
        )"""
    )
    op.execute(
        """CREATE FUNCTION jobs_record_wait_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_wait_ends (awaited, status) VALUES (NEW.id, NEW.status);
    RETURN NULL;
END
$$"""
    )
    op.execute(
        "CREATE TRIGGER jobs_record_wait_end AFTER UPDATE OF status ON jobs FOR EACH ROW "
        "WHEN (NEW.has_waiters AND OLD.status IN ('waiting', 'queued', 'running') "
        "AND NEW.status IN ('done', 'failed', 'cancelled')) "
        "EXECUTE FUNCTION jobs_record_wait_end()"
    )


def downgrade() -> None:
    """Drop them; waiting jobs become queued (they run without waiting)."""
    op.execute("DROP TRIGGER jobs_record_wait_end ON jobs")
    op.execute("DROP FUNCTION jobs_record_wait_end()")
    op.execute("DROP TABLE job_wait_ends")
    op.execute("DROP TABLE job_waits")
    op.execute("DROP INDEX jobs_waiting_idx")
    op.execute("UPDATE jobs SET status = 'queued' WHERE status = 'waiting'")
    op.execute("ALTER TABLE jobs DROP COLUMN has_waiters")
    op.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_wait_rule_check")
    op.execute("ALTER TABLE jobs DROP COLUMN wait_rule")
    op.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_status_check")
    op.execute(
        f"ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ({OLD_STATUSES}))"
    )
