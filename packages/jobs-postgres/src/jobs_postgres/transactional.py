"""Transactional enqueue: a module's domain rows and its job commit together, or neither does.

A module that writes its own rows and enqueues the job that processes them calls
:func:`enqueue` with the SQLAlchemy ``Connection`` or ``Session`` of its transaction::

    from jobs_postgres import enqueue

    with engine.begin() as conn:
        conn.execute(insert(crawls).values(id=crawl_id, ...))
        enqueue(conn, registry, org_id, "crawl_site", {"crawl_id": str(crawl_id)})

The job is inserted in that transaction (its NOTIFY too): the caller's commit publishes it, the
caller's rollback leaves no job. A dedup refusal runs in a savepoint and leaves the transaction
usable. It is the same dedup, validation and priority rules as every enqueue
(:meth:`jobs_core.JobService.enqueue`, docs/contract.md §3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobs_core import Clock, Enqueued, Job, JobService, Registry, SystemClock
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from jobs_postgres.store import PostgresJobStore

__all__ = ["enqueue", "enqueue_many", "jobs_in"]


def _connection(target: Connection | Session) -> Connection:
    if isinstance(target, Session):
        return target.connection()  # the session's transaction (begun if needed)
    if isinstance(target, Connection):
        return target
    raise TypeError(f"expected a SQLAlchemy Connection or Session, got {type(target).__name__}")


def jobs_in(
    target: Connection | Session, registry: Registry, clock: Clock | None = None
) -> JobService:
    """The job use cases inside ``target``'s transaction (every write commits with it)."""
    conn = _connection(target)
    store = PostgresJobStore(conn.engine, connection=conn)
    return JobService(store, registry, clock or SystemClock())


def enqueue(
    target: Connection | Session,
    registry: Registry,
    org_id: str,
    type_name: str,
    payload: Mapping[str, Any] | None = None,
    *,
    dedup_key: str | None = None,
    run_at: datetime | None = None,
    priority: int = 0,
    clock: Clock | None = None,
) -> Enqueued:
    """Enqueue a job of ``registry``'s ``type_name`` inside ``target``'s transaction.

    Returns :class:`jobs_core.Enqueued` (``created=False`` with the org's job that holds the
    dedup key). Raises what :meth:`jobs_core.JobService.enqueue` raises (``UnknownJobType``,
    ``PayloadInvalid``, ...); nothing is committed here.
    """
    return jobs_in(target, registry, clock).enqueue(
        org_id, type_name, payload, dedup_key=dedup_key, run_at=run_at, priority=priority
    )


def enqueue_many(
    target: Connection | Session,
    registry: Registry,
    org_id: str,
    type_name: str,
    payloads: Iterable[Mapping[str, Any]],
    *,
    dedup_keys: Sequence[str | None] | None = None,
    priority: int = 0,
    clock: Clock | None = None,
) -> list[Job]:
    """Enqueue many jobs of one type inside ``target``'s transaction (held keys skipped)."""
    return jobs_in(target, registry, clock).enqueue_many(
        org_id, type_name, payloads, dedup_keys=dedup_keys, priority=priority
    )
