"""The table of the operators' quota overrides (revision ``0011_org_quotas``, decision 0033), on
the same :data:`jobs_postgres.schema.metadata` as ``jobs``.

One row per org an operator changed; a NULL limit keeps the default of the deployable's
settings (``JOBS_QUOTA_*``). The counted uses are read where they are: queued jobs through
``jobs_org_queue_idx`` (the fair claim's index: queued jobs by org), schedules through
``schedules_org_name_key``. No counter is kept, so no write of the enqueue or the claim grows.
"""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Column, Double, Integer, Table, Text, text

from jobs_postgres.schema import TIMESTAMPTZ, metadata

org_quotas = Table(
    "job_org_quotas",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("max_schedules", Integer),
    Column("min_schedule_interval_s", Integer),
    Column("max_queued", Integer),
    Column("enqueue_rate", Double),
    Column("enqueue_burst", Integer),
    Column("updated_at", TIMESTAMPTZ, nullable=False, server_default=text("now()")),
    Column("updated_by", Text, nullable=False, server_default=text("''")),
    CheckConstraint("max_schedules >= 0", name="job_org_quotas_max_schedules_check"),
    CheckConstraint(
        "min_schedule_interval_s >= 1", name="job_org_quotas_min_schedule_interval_s_check"
    ),
    CheckConstraint("max_queued >= 0", name="job_org_quotas_max_queued_check"),
    CheckConstraint("enqueue_rate > 0", name="job_org_quotas_enqueue_rate_check"),
    CheckConstraint("enqueue_burst >= 1", name="job_org_quotas_enqueue_burst_check"),
)
