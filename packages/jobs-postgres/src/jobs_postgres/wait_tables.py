"""The tables of jobs that wait for others (migration ``0016_job_waits``, decision 0041), on the
schema's metadata: ``job_waits`` (one row per awaited job and waiter, ``ended`` once a release
pass took its end) and ``job_wait_ends`` (the ends to release, appended by the trigger
``jobs_record_wait_end``). The role that uses them: :mod:`jobs_postgres.waits`."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import UUID

from jobs_postgres.schema import metadata

job_waits = Table(
    "job_waits",
    metadata,
    Column("awaited", UUID(as_uuid=True), nullable=False),
    Column("waiter", UUID(as_uuid=True), ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("ord", Integer, nullable=False),
    Column("ended", Text),
    PrimaryKeyConstraint("awaited", "waiter", name="job_waits_pkey"),
)

# A waiter's edges in the order given: its count of unended ones, its awaited jobs.
Index("job_waits_waiter_idx", job_waits.c.waiter, job_waits.c.ord)

job_wait_ends = Table(
    "job_wait_ends",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("awaited", UUID(as_uuid=True), nullable=False),
    Column("status", Text, nullable=False),
)
