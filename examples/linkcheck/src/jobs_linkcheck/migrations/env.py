"""Alembic environment of the linkcheck chain: the jobs chain's runner, this chain's metadata."""

from alembic import context
from jobs_postgres.migrations import run_online

from jobs_linkcheck.tables import metadata

context.config.attributes.setdefault("metadata", metadata)
run_online()
