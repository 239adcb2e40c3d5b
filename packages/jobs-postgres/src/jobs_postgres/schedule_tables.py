"""The tables of schedules and retention (revision ``0004_schedules_retention``), on the
same :data:`jobs_postgres.schema.metadata` as ``jobs``.

- ``schedules``: one row per schedule, unique per ``(org_id, name)``; ``next_run_at`` is the
  tick a scheduler fires next (docs/schedules.md);
- ``schedule_runs``: one row per fired tick, primary key ``(schedule_id, tick)``: the database
  itself refuses a tick enqueued twice (invariant 11); the purge trims it;
- ``jobs_settings``: run-time settings an operator changes (the retention settings);
- ``jobs_finished_idx`` on ``jobs``: the finished rows of a type in ``(finished_at, id)``
  order, which every purge batch and the keep-N lookups walk (docs/retention.md).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from jobs_postgres.schema import TIMESTAMPTZ, jobs, metadata

FINISHED_INDEX = "jobs_finished_idx"

schedules = Table(
    "schedules",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True, server_default=text("uuidv7()")),
    Column("org_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("job_type", Text, nullable=False),
    Column("payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("cron", Text, nullable=False),
    Column("timezone", Text, nullable=False, server_default=text("'UTC'")),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    Column("missed", Text, nullable=False, server_default=text("'once'")),
    Column("max_catchup", Integer, nullable=False, server_default=text("10")),
    Column("description", Text, nullable=False, server_default=text("''")),
    Column("source", Text, nullable=False, server_default=text("'api'")),
    Column("next_run_at", TIMESTAMPTZ, nullable=False),
    Column("last_run_at", TIMESTAMPTZ),
    Column("last_job_id", UUID(as_uuid=True)),
    Column("created_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    CheckConstraint("missed IN ('skip', 'once', 'each')", name="schedules_missed_check"),
    CheckConstraint("source IN ('code', 'api')", name="schedules_source_check"),
    CheckConstraint("max_catchup BETWEEN 1 AND 100", name="schedules_max_catchup_check"),
    UniqueConstraint("org_id", "name", name="schedules_org_name_key"),
)
# What a scheduler polls: the enabled schedules due first.
Index(
    "schedules_due_idx",
    schedules.c.next_run_at,
    postgresql_where=text("enabled"),
)

schedule_runs = Table(
    "schedule_runs",
    metadata,
    Column(
        "schedule_id",
        UUID(as_uuid=True),
        ForeignKey("schedules.id", ondelete="CASCADE", name="schedule_runs_schedule_id_fkey"),
        nullable=False,
    ),
    Column("tick", TIMESTAMPTZ, nullable=False),
    # No foreign key to jobs: a purged job leaves the record of its tick.
    Column("job_id", UUID(as_uuid=True), nullable=False),
    Column("fired_at", TIMESTAMPTZ, nullable=False),
    PrimaryKeyConstraint("schedule_id", "tick", name="schedule_runs_pkey"),
)

jobs_settings = Table(
    "jobs_settings",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", JSONB, nullable=False),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("updated_by", Text),
)

Index(
    FINISHED_INDEX,
    jobs.c.type,
    jobs.c.finished_at,
    jobs.c.id,
    postgresql_where=text("status IN ('done', 'failed', 'cancelled')"),
)
