"""The tables of jobs, as SQLAlchemy Core: the single definition the code imports.

The Alembic migration (``jobs_postgres/migrations/versions``) creates exactly these; a test
compares the migrated database with this metadata so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB, TIMESTAMP, UUID
from sqlalchemy.types import UserDefinedType

metadata = MetaData()

TIMESTAMPTZ = TIMESTAMP(timezone=True)

QUEUE_INDEX = "jobs_queue_idx"
"""The partial index the claim, the sweep and the stale scan walk (see ``jobs_postgres.sql``)."""

# A queue table is rewritten all day long: every job is inserted, claimed, heartbeaten and
# finished, so most row versions die young.
# - fillfactor 70 leaves room in each page for the new version of a row, so the updates that
#   touch no indexed column (heartbeats, progress) are HOT: no new index entries, and the dead
#   version is pruned on the page without waiting for vacuum.
# - autovacuum at 1 % of the table (instead of 20 %) plus a fixed floor keeps dead tuples (and
#   the dead index entries at the head of the queue index, which every claim walks over) from
#   piling up between vacuums as the history grows; analyze follows so the planner keeps
#   seeing a small queue inside a large table.
JOBS_STORAGE = {
    "fillfactor": "70",
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
}

jobs = Table(
    "jobs",
    metadata,
    # -- docs/contract.md §1 --------------------------------------------------------------------
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("uuidv7()")),
    Column("org_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'queued'")),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("dedup_key", Text),
    Column("payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("progress", JSONB),
    Column("report", JSONB),
    Column("error", Text),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("started_at", TIMESTAMPTZ),
    Column("finished_at", TIMESTAMPTZ),
    # -- the design brief's additions -------------------------------------------------------------
    Column("run_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("max_attempts", Integer, nullable=False, server_default=text("3")),
    Column("dedup_scope", Text, nullable=False, server_default=text("'queue'")),
    Column("requested_dedup_key", Text),
    Column("cancel_requested_at", TIMESTAMPTZ),
    Column("lease", UUID(as_uuid=True)),
    # -- flow control (decision 0015) ---------------------------------------------------------
    Column("priority", Integer, nullable=False, server_default=text("0")),
    Column("concurrency_key", Text),
    Column("snoozes", Integer, nullable=False, server_default=text("0")),
    # -- the heartbeat (migration 0006_heartbeat_at, decision 0020) -------------------------------
    # When the running attempt last showed life: set by the claim, every heartbeat and every
    # progress save; the sweep reads it (docs/contract.md §5).
    Column("heartbeat_at", TIMESTAMPTZ),
    # -- lifecycle (decision 0025): private columns, never part of jobs_core.Job -----------------
    # When the end hook (on_fail / on_cancel) of a failed or cancelled job is due; NULL: none.
    Column("hook_due_at", TIMESTAMPTZ),
    # The handler's private checkpoint: never shown by the API, the CLI or the event log.
    Column("checkpoint", JSONB),
    # -- children (migration 0013_job_parent, decision 0038) --------------------------------------
    # The job whose handler enqueued this one (ctx.enqueue), same org; NULL for any other. No
    # foreign key: a parent may be deleted (retention, jobs rm) before its children. Indexed
    # for the children of a job (jobs_parent_idx, migration 0019).
    Column("parent_id", UUID(as_uuid=True)),
    # -- tracing (migration 0015_job_trace_context, decision 0039) ---------------------------------
    # The W3C trace context of the job's enqueue ({"traceparent": ...}); NULL with tracing off.
    Column("trace_context", JSONB),
    # -- waits (migration 0016_job_waits, decision 0041) ----------------------------------------
    # Private: the rule of a job that awaits others (NULL for one that awaits none), and whether
    # others await this one (its end is then recorded by the trigger jobs_record_wait_end).
    Column("wait_rule", Text),
    Column("has_waiters", Boolean, nullable=False, server_default=text("false")),
    CheckConstraint("priority BETWEEN -100 AND 100", name="jobs_priority_check"),
    CheckConstraint("snoozes >= 0", name="jobs_snoozes_check"),
    CheckConstraint(
        "status IN ('waiting', 'queued', 'running', 'done', 'failed', 'cancelled')",
        name="jobs_status_check",
    ),
    CheckConstraint("wait_rule IN ('all_done', 'all_ended')", name="jobs_wait_rule_check"),
    CheckConstraint("dedup_scope IN ('queue', 'active')", name="jobs_dedup_scope_check"),
    CheckConstraint("attempts >= 0", name="jobs_attempts_check"),
    CheckConstraint("max_attempts >= 1", name="jobs_max_attempts_check"),
    # Decision 0003: a key is unique per org. NULLs never conflict, so released keys are free.
    UniqueConstraint("org_id", "dedup_key", name="jobs_org_dedup_key_key"),
    postgresql_with=JOBS_STORAGE,
)

# Spec 000 §1 index, with ``id`` as the tie-breaker of the keyset cursor of a type-filtered list.
Index(
    "jobs_org_type_created_idx",
    jobs.c.org_id,
    jobs.c.type,
    jobs.c.created_at.desc(),
    jobs.c.id.desc(),
)
# An org's jobs newest first, with or without a status filter: GET /jobs and its cursor.
Index("jobs_org_created_idx", jobs.c.org_id, jobs.c.created_at.desc(), jobs.c.id.desc())
# Spec 000 §1 partial queue index: only live rows, so it stays small however large the history
# grows. ``priority DESC, created_at, id`` is exactly the claim's ORDER BY (decision 0015).
Index(
    QUEUE_INDEX,
    jobs.c.status,
    jobs.c.priority.desc(),
    jobs.c.created_at,
    jobs.c.id,
    postgresql_where=text("status IN ('queued', 'running')"),
)
# No index of running jobs per key: a claim under limits counts the running set through
# QUEUE_INDEX's ``running`` range (the set is as small as the workers' slots), so a claim
# writes one index entry fewer (migration 0008_lighter_writes).

# Jobs whose end hook is due (decision 0025): a worker's hook pass; only the rows with a hook
# pending, so it stays tiny.
Index("jobs_hook_due_idx", jobs.c.hook_due_at, postgresql_where=text("hook_due_at IS NOT NULL"))

# Queued jobs per org in claim order: the fair claim's skip scan over orgs and each org's head
# (jobs_postgres.claims, the fair CTEs; decisions 0015 "Fairness between orgs", 0027).
Index(
    "jobs_org_queue_idx",
    jobs.c.org_id,
    jobs.c.priority.desc(),
    jobs.c.created_at,
    jobs.c.id,
    postgresql_where=text("status = 'queued'"),
)

# Waiting jobs per type (decision 0041): the gauges; only the waiting rows.
Index("jobs_waiting_idx", jobs.c.type, postgresql_where=text("status = 'waiting'"))

# A job's children (migration 0019, decision 0045): GET /jobs?parent_id=, the children counts
# of a listed page. Only children have an entry; parent_id never changes (HOT updates kept).
Index("jobs_parent_idx", jobs.c.parent_id, postgresql_where=text("parent_id IS NOT NULL"))

# Live worker processes (jobs_core.workers): operators' view; never shown to tenants.
job_workers = Table(
    "job_workers",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("types", ARRAY(Text), nullable=False),
    Column("concurrency", Integer, nullable=False),
    Column("started_at", TIMESTAMPTZ, nullable=False),
    Column("last_seen_at", TIMESTAMPTZ, nullable=False),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("uuidv7()")),
    Column("org_id", Text, nullable=False),
    # sha256 of the token, computed by the API: the table never holds a usable token.
    Column("token_hash", Text, nullable=False),
    Column("label", Text),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("revoked_at", TIMESTAMPTZ),
    UniqueConstraint("token_hash", name="api_tokens_token_hash_key"),
)
Index("api_tokens_org_idx", api_tokens.c.org_id, api_tokens.c.created_at)


# -- the event log and browser sessions (migration 0002_events, decision 0013) -----------------


class XID8(UserDefinedType[int]):
    """PostgreSQL's 64-bit transaction id: the writer's ``pg_current_xact_id()``."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        """The type's name in DDL."""
        return "xid8"


# One row per visible change of a job, written by the triggers on ``jobs`` in the writer's
# transaction. Ordered by (xid, seq): every row whose xid is below the oldest running
# transaction's is final, so a reader that stops there never skips a row committed later
# (jobs_postgres.events).
job_events = Table(
    "job_events",
    metadata,
    Column("xid", XID8(), nullable=False, server_default=text("pg_current_xact_id()")),
    Column("seq", BigInteger, Identity(always=True), nullable=False),
    Column("org_id", Text, nullable=False),
    Column("job_id", UUID(as_uuid=True), nullable=False),
    Column("kind", Text, nullable=False),
    Column("at", TIMESTAMPTZ, nullable=False, server_default=text("clock_timestamp()")),
    # The job as it is after the change (before it, for a delete): its fields a reader shows,
    # copied from the row as they are typed there; no JSON is built by the writer (migration
    # 0010_typed_event_log). Never the lease, the heartbeat or a private column.
    Column("type", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("progress", JSONB),
    Column("report", JSONB),
    Column("error", Text),
    Column("created_at", TIMESTAMPTZ, nullable=False),
    Column("run_at", TIMESTAMPTZ, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("dedup_scope", Text, nullable=False),
    Column("dedup_key", Text),
    Column("requested_dedup_key", Text),
    Column("started_at", TIMESTAMPTZ),
    Column("finished_at", TIMESTAMPTZ),
    Column("cancel_requested_at", TIMESTAMPTZ),
    PrimaryKeyConstraint("xid", "seq", name="job_events_pkey"),
    postgresql_with={
        "autovacuum_vacuum_scale_factor": "0.05",
        "autovacuum_vacuum_insert_scale_factor": "0.05",
    },
)
# No index on ``at``: the prune walks the primary key from its oldest row (positions follow
# commit time) and stops at the first row still young (migration 0008_lighter_writes).

EVENT_JOB_COLUMNS: tuple[str, ...] = tuple(
    c.name
    for c in job_events.columns
    if c.name not in ("xid", "seq", "org_id", "job_id", "kind", "at")
)
"""The columns of ``job_events`` that hold the job (after ``job_id`` and ``org_id``)."""

job_events_state = Table(
    "job_events_state",
    metadata,
    Column("id", SmallInteger, primary_key=True, server_default=text("1")),
    Column("id_key", BYTEA, nullable=False),  # the key of the opaque event ids
    Column("horizon_xid", BigInteger, nullable=False, server_default=text("0")),
    Column("horizon_seq", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("id = 1", name="job_events_state_one_row"),
)

api_sessions = Table(
    "api_sessions",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("uuidv7()")),
    Column("session_hash", Text, nullable=False),  # sha256 of the cookie, never the cookie
    Column(
        "token_id",
        UUID(as_uuid=True),
        ForeignKey("api_tokens.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("org_id", Text, nullable=False),
    Column("created_at", TIMESTAMPTZ, nullable=False),
    Column("expires_at", TIMESTAMPTZ, nullable=False),
    Column("ended_at", TIMESTAMPTZ),
    UniqueConstraint("session_hash", name="api_sessions_session_hash_key"),
)
Index("api_sessions_token_idx", api_sessions.c.token_id)
# The schedules and retention tables (and the finished-jobs index), and the quota overrides, are
# defined beside their store, on this same metadata.
import jobs_postgres.attempt_tables  # noqa: E402
import jobs_postgres.quota_tables  # noqa: E402
import jobs_postgres.rate_tables  # noqa: E402
import jobs_postgres.schedule_tables  # noqa: E402
import jobs_postgres.wait_tables  # noqa: E402, F401
