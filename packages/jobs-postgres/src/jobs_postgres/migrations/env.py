"""Alembic environment of the jobs chain: see :func:`jobs_postgres.migrations.run_online`."""

from jobs_postgres.migrations import run_online

run_online()
