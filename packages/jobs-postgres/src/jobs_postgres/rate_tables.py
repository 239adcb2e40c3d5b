"""The table of rate limits per key (migration ``0017_job_rate_keys``, decision 0042), on the
schema's metadata: ``job_rate_keys``, one row per (type, key) of a rate-limited type, its most
recent starts newest first (``jobs_core.rates``). Written and read by the claim under a rate
limit (:mod:`jobs_postgres.rate_claims`), read by "why is this job waiting?"."""

from __future__ import annotations

from sqlalchemy import Column, PrimaryKeyConstraint, Table, Text
from sqlalchemy.dialects.postgresql import ARRAY

from jobs_postgres.schema import TIMESTAMPTZ, metadata

job_rate_keys = Table(
    "job_rate_keys",
    metadata,
    Column("type", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("starts", ARRAY(TIMESTAMPTZ), nullable=False),
    PrimaryKeyConstraint("type", "key", name="job_rate_keys_pkey"),
)
