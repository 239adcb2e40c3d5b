"""``map_reconcile``: map every unmapped imported row whose normalized URL is a page's.

The convergence invariant (docs/contract.md §3, docs/imports.md): whatever the order in which
imports finish, pages arrive and reconciles run, once the queue drains every row that matches a
page is mapped. Three pieces make it hold:

1. **Every writer enqueues in its own transaction.** An import's final transaction and every
   page load call :func:`request_reconcile` before committing, so the data and the request to
   map it become visible together — never data without a pending reconcile.
2. **``dedup_scope='queue'``** (decided by the core): a request while a reconcile is *queued*
   joins it; once it is *running* its key is released and the request creates a new job, run
   after it (zero lost wake-up).
3. **A target-scoped advisory lock closes the last window.** A writer could join a queued job
   whose run then starts — and takes its snapshot — before the writer commits: that run would not
   see the writer's rows, and no other job would be queued. So writers take the target's lock in
   *shared* mode before enqueuing, and the reconcile takes it *exclusive* before its UPDATE: a run
   whose job a writer joined waits for that writer's commit, and a writer that arrives while a
   run holds the lock waits for it, then finds the key released and enqueues a fresh job.
   Writers never wait on each other (shared), and the lock lives only as long as a transaction.

The UPDATE itself is one set-based, idempotent statement: running it twice, or by two workers at
once, maps each row once (``page_id IS NULL`` is re-checked on the locked row).
"""

from __future__ import annotations

import uuid
from typing import Any

from jobs_core import Job, JobService
from sqlalchemy import Connection, text

__all__ = [
    "ADVISORY_NAMESPACE",
    "RECONCILE",
    "lock_target_exclusive",
    "lock_target_shared",
    "map_rows",
    "reconcile_dedup_key",
    "request_reconcile",
]

RECONCILE = "map_reconcile"

ADVISORY_NAMESPACE = 0x1A7B0
"""The first key of the target locks (the second is ``hashtext`` of the target's id): keeps them
apart from any other advisory lock of the database. A hash collision between two targets only
makes them wait for each other now and then."""

_LOCK_SHARED = text("SELECT pg_advisory_xact_lock_shared(:namespace, hashtext(:target))")
_LOCK_EXCLUSIVE = text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:target))")

# Walks import_rows_unmapped_idx (site_target_id, normalized_url) WHERE page_id IS NULL, and the
# pages_target_url_key unique index on the page side.
_MAP = text(
    """
    UPDATE import_rows AS r
       SET page_id = p.id
      FROM pages AS p
     WHERE r.site_target_id = :target
       AND r.page_id IS NULL
       AND p.site_target_id = :target
       AND p.normalized_url = r.normalized_url
    """
)


def _lock_params(site_target_id: uuid.UUID) -> dict[str, Any]:
    return {"namespace": ADVISORY_NAMESPACE, "target": str(site_target_id)}


def lock_target_shared(conn: Connection, site_target_id: uuid.UUID) -> None:
    """Take the target's lock in shared mode until the end of ``conn``'s transaction."""
    conn.execute(_LOCK_SHARED, _lock_params(site_target_id))


def lock_target_exclusive(conn: Connection, site_target_id: uuid.UUID) -> None:
    """Take the target's lock in exclusive mode until the end of ``conn``'s transaction."""
    conn.execute(_LOCK_EXCLUSIVE, _lock_params(site_target_id))


def reconcile_dedup_key(site_target_id: uuid.UUID) -> str:
    """``map_reconcile:<site_target_id>`` (the key convention of docs/contract.md §3)."""
    return f"{RECONCILE}:{site_target_id}"


def request_reconcile(
    jobs: JobService, conn: Connection, org_id: str, site_target_id: uuid.UUID
) -> Job:
    """Enqueue (or join) the target's reconcile inside ``conn``'s transaction.

    ``jobs`` must run on a store bound to ``conn`` (``PostgresJobStore.bound_to(conn)``) so the
    job is published by the caller's commit. Call it after the writes it must cover, in the
    same transaction; it takes the target's shared lock first (see the module docstring).
    """
    lock_target_shared(conn, site_target_id)
    enqueued = jobs.enqueue(
        org_id,
        RECONCILE,
        {"site_target_id": str(site_target_id)},
        dedup_key=reconcile_dedup_key(site_target_id),
    )
    return enqueued.job


def map_rows(conn: Connection, site_target_id: uuid.UUID) -> int:
    """Run the reconcile UPDATE for one target in ``conn``'s transaction; rows newly mapped.

    Takes the target's exclusive lock first, in its own statement, so the UPDATE's snapshot is
    taken after every writer that joined this run's job has committed.
    """
    lock_target_exclusive(conn, site_target_id)
    result = conn.execute(_MAP, {"target": site_target_id})
    return int(result.rowcount)
