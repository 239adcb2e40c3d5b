"""Operator reads across organizations: ``jobs ls`` without ``--org``, ``jobs show`` by id alone.

The store port is org-scoped on purpose (invariant 8: an org never sees another's jobs), and the
HTTP API only ever has one org. An operator at a terminal on the database has no such limit, so
the CLI first finds *which* org owns the rows (one indexed query on the ``jobs`` table), then
reads each job through the store's ordinary org-scoped ``get``: the row mapping stays the
adapter's, and nothing here can change a job.
"""

from __future__ import annotations

import uuid

from jobs_core import Job, JobFilter
from jobs_postgres.store import PostgresJobStore


def _owners(store: PostgresJobStore, query: JobFilter) -> list[tuple[uuid.UUID, str]]:
    from jobs_postgres.schema import jobs
    from sqlalchemy import select

    statement = select(jobs.c.id, jobs.c.org_id)
    if query.statuses is not None:
        statement = statement.where(jobs.c.status.in_(sorted(s.value for s in query.statuses)))
    if query.type is not None:
        statement = statement.where(jobs.c.type == query.type)
    statement = statement.order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(query.limit)
    with store.engine.connect() as connection:
        return [(row.id, row.org_id) for row in connection.execute(statement)]


def list_all_orgs(store: PostgresJobStore, query: JobFilter) -> list[Job]:
    """Jobs of every org matching ``query``, newest first."""
    found = (store.get(org_id, job_id) for job_id, org_id in _owners(store, query))
    # A job deleted between the two reads is simply not listed.
    return [job for job in found if job is not None]


def get_any_org(store: PostgresJobStore, job_id: uuid.UUID) -> Job | None:
    """The job with this id, whichever org owns it."""
    from jobs_postgres.schema import jobs
    from sqlalchemy import select

    with store.engine.connect() as connection:
        org_id = connection.execute(select(jobs.c.org_id).where(jobs.c.id == job_id)).scalar()
    return None if org_id is None else store.get(org_id, job_id)
