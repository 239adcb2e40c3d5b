"""Jobs that wait for others on PostgreSQL (:class:`jobs_core.ports.Waits`, decision 0041): the
tables ``job_waits`` and ``job_wait_ends`` (``jobs_postgres.wait_tables``), the inserts of a
dependent job and of a batch, and the release pass (the waiter's read, what it awaits:
``jobs_postgres.reads.JobReads.awaited``).

The rules are the core's (:mod:`jobs_core.waits`): each write here reads what the rule needs
under row locks, asks the core, and writes its answer. Locks are taken in id order (the
awaited rows by an insert, the waiters by a release pass), as every other multi-row write here
takes them, so none of these waits on another write in a cycle.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobs_core import codec, domain, parents, uuid7, waits
from jobs_core.domain import Job, NewJob, Patch, Status
from jobs_core.ports import Completed
from jobs_core.waits import DependencyInvalid, Ended, Release, WaitRule
from sqlalchemy import Connection, text

from jobs_postgres import bulk, sql
from jobs_postgres.connections import StoreConnections
from jobs_postgres.job_rows import columns, job_from_row
from jobs_postgres.rows import save_job

# The jobs an insert waits for, locked (the finish of a running one waits, or is waited for, so
# its end is either seen here or recorded by the trigger), in id order. Index: the primary key.
_LOCK_AWAITED = text(
    """SELECT j.id, j.status FROM jobs AS j
    WHERE j.id = ANY(CAST(:ids AS uuid[])) AND j.org_id = :org_id
    ORDER BY j.id FOR NO KEY UPDATE"""
)

# Their ends will be recorded (the trigger's WHEN reads this column). Index: the primary key.
_MARK_AWAITED = text(
    """UPDATE jobs SET has_waiters = true
    WHERE id = ANY(CAST(:ids AS uuid[])) AND NOT has_waiters"""
)

# A waiter as the core built it (jobs_core.waits.start): its status and, cancelled at once, its
# end. Index: jobs_org_dedup_key_key resolves the conflict.
_INSERT_WAITER = text(
    f"""WITH inserted AS (
    INSERT INTO jobs AS j (
        id, org_id, type, status, payload, dedup_key, requested_dedup_key, dedup_scope,
        max_attempts, created_at, run_at, priority, concurrency_key, parent_id, error,
        finished_at, hook_due_at, wait_rule, trace_context
    )
    VALUES (
        :id, :org_id, :type, :status, CAST(:payload AS jsonb), :dedup_key, :requested_dedup_key,
        :dedup_scope, :max_attempts, :now, :run_at, :priority, :concurrency_key, :parent_id,
        :error, :finished_at, :hook_due_at, :wait_rule, CAST(:trace_context AS jsonb)
    )
    {sql.ON_DEDUP_CONFLICT}
    RETURNING j.id, j.status
),
{sql.wake("inserted")}
SELECT inserted.id FROM inserted {sql.NOTIFIED}"""
)

_INSERT_EDGES = text(
    """INSERT INTO job_waits (awaited, waiter, ord, ended)
    SELECT e.awaited, :waiter, e.ord, e.ended
    FROM unnest(CAST(:awaited AS uuid[]), CAST(:ended AS text[]))
         WITH ORDINALITY AS e(awaited, ended, ord)"""
)

# The oldest recorded ends, each taken once (another pass skips those this one holds).
_TAKE_ENDS = text(
    """DELETE FROM job_wait_ends AS e
    WHERE e.id IN (
        SELECT id FROM job_wait_ends ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED
    )
    RETURNING e.id, e.awaited, e.status"""
)

# Each edge of those ends that had not ended yet, marked with its end: an edge ends once.
# Index: job_waits_pkey (awaited first).
_END_EDGES = text(
    """UPDATE job_waits AS w SET ended = e.status
    FROM unnest(CAST(:awaited AS uuid[]), CAST(:statuses AS text[])) AS e(awaited, status)
    WHERE w.awaited = e.awaited AND w.ended IS NULL
    RETURNING w.waiter, w.awaited, w.ended"""
)

# The waiters, locked in id order; their rule. Index: the primary key.
_LOCK_WAITERS = text(
    f"""SELECT {columns("j")}, j.wait_rule FROM jobs AS j
    WHERE j.id = ANY(CAST(:ids AS uuid[]))
    ORDER BY j.id FOR UPDATE"""
)

# How many of each waiter's edges have not ended, read after the lock (a statement of its own,
# so that it sees what a pass that held the lock before committed). Index: job_waits_waiter_idx.
_LEFT = text(
    """SELECT w.waiter, count(*) FILTER (WHERE w.ended IS NULL)
    FROM job_waits AS w WHERE w.waiter = ANY(CAST(:ids AS uuid[]))
    GROUP BY w.waiter"""
)

# The children a parent's attempt enqueued at once, locked as an insert locks what it awaits
# (their end is either seen here or recorded after this commits), in id order. Index: the
# primary key.
_LOCK_CHILDREN = text(
    """SELECT j.id, j.status FROM jobs AS j
    WHERE j.id = ANY(CAST(:ids AS uuid[]))
    ORDER BY j.id FOR NO KEY UPDATE"""
)

# A parent's edges to its children, after those it has (a parent may wait more than once); a
# child it awaited before is awaited again, as it is now. Index: job_waits_pkey,
# job_waits_waiter_idx for the last ``ord``.
_ADD_EDGES = text(
    """INSERT INTO job_waits AS w (awaited, waiter, ord, ended)
    SELECT e.awaited, :waiter,
           coalesce((SELECT max(o.ord) FROM job_waits AS o WHERE o.waiter = :waiter), 0) + e.ord,
           e.ended
    FROM unnest(CAST(:awaited AS uuid[]), CAST(:ended AS text[]))
         WITH ORDINALITY AS e(awaited, ended, ord)
    ON CONFLICT (awaited, waiter) DO UPDATE SET ended = EXCLUDED.ended"""
)

# The parents' rule: a batch callback's (every child's end, whatever it is). Index: the
# primary key. No event: the update triggers' column lists leave out wait_rule.
_PARENT_RULE = text(
    """UPDATE jobs SET wait_rule = 'all_ended'
    WHERE id = ANY(CAST(:ids AS uuid[])) AND wait_rule IS DISTINCT FROM 'all_ended'"""
)


class _KeyHeld(Exception):
    """The waiter's dedup key is held: its transaction is rolled back."""


class WaitRows(StoreConnections):
    """The :class:`jobs_core.ports.Waits` role of the PostgreSQL store."""

    if TYPE_CHECKING:  # PostgresJobStore's

        def insert_many(self, new: Sequence[NewJob], now: datetime) -> list[Job]: ...

    def insert_after(
        self, new: NewJob, depends_on: Sequence[uuid.UUID], rule: WaitRule, now: datetime
    ) -> Job | None:
        """Insert ``new`` waiting for the org's jobs ``depends_on``."""
        try:
            with self._transaction() as conn:
                rows = conn.execute(
                    _LOCK_AWAITED, {"ids": list(depends_on), "org_id": new.org_id}
                ).all()
                found = {row[0]: Status(row[1]) for row in rows}
                missing = [job_id for job_id in depends_on if job_id not in found]
                if missing:
                    raise DependencyInvalid(
                        f"depends_on names {len(missing)} job(s) that are not jobs of the org",
                        missing,
                    )
                awaited = [Ended(job_id, found[job_id]) for job_id in depends_on]
                job = _insert_waiter(conn, new, awaited, rule, now)
                if job is None:
                    raise _KeyHeld
                return job
        except _KeyHeld:  # nothing is written
            return None

    def insert_batch(
        self, members: Sequence[NewJob], callback: NewJob, now: datetime
    ) -> tuple[list[Job], Job]:
        """The members (``insert_many``), then the callback waiting for those inserted."""
        with self._transaction() as conn:
            inserted = type(self)(self.engine, connection=conn).insert_many(members, now)
            spec = dataclasses.replace(callback, dedup_key=None)
            awaited = [Ended(job.id, job.status) for job in inserted]
            job = _insert_waiter(conn, spec, awaited, WaitRule.ALL_ENDED, now)
            assert job is not None  # no key: never refused
            return inserted, job

    def release_waiting(self, now: datetime, limit: int, release: Release) -> list[Job]:
        """Take up to ``limit`` recorded ends and release their waiters."""
        with self._transaction() as conn:
            taken = conn.execute(_TAKE_ENDS, {"limit": limit}).all()
            if not taken:
                return []
            first: dict[uuid.UUID, str] = {}
            for _, awaited, status in sorted(taken):
                first.setdefault(awaited, status)  # a job ended twice (retried): its first end
            edges = conn.execute(
                _END_EDGES, {"awaited": list(first), "statuses": list(first.values())}
            ).all()
            news: dict[uuid.UUID, list[Ended]] = {}
            for waiter, awaited, status in edges:
                news.setdefault(waiter, []).append(Ended(awaited, Status(status)))
            if not news:
                return []
            ids = sorted(news)
            locked = conn.execute(_LOCK_WAITERS, {"ids": ids}).all()
            left: dict[uuid.UUID, int] = {
                row[0]: row[1] for row in conn.execute(_LEFT, {"ids": ids}).all()
            }
            changed = []
            for row in locked:
                job = job_from_row(row[:-1])
                ended = tuple(sorted(news[job.id]))
                waiting = waits.Waiting(
                    job, left.get(job.id, 0) + len(ended), WaitRule(row[-1]), ended
                )
                after = release(waiting, now).job
                if after != job:
                    changed.append(save_job(conn, job, after, now))
            return changed

    def wait_for_children(
        self, patches: Sequence[Patch], done: Completed, inserted: Sequence[Job]
    ) -> Completed:
        """Give each parent ``patches`` left ``waiting`` (decision 0043) its edges to the
        children of its attempt — ``inserted`` with the outcome, and those it enqueued at once —
        and release it now if they have all ended; in the outcome's transaction (the store is
        bound to it). ``done`` with those parents as they are now."""
        waiting = [
            (i, change, job)
            for i, (change, job) in enumerate(zip(patches, done.finished, strict=True))
            if job is not None and parents.waits_for_children(change, job)
        ]
        if not waiting:
            return done
        finished = list(done.finished)
        kids: dict[uuid.UUID, list[Job]] = {}
        for child in inserted:
            assert child.parent_id is not None
            kids.setdefault(child.parent_id, []).append(child)
        awaits = sorted({child for _, change, _ in waiting for child in change.awaits})
        with self._statement() as conn:
            found: dict[uuid.UUID, Status] = {}
            if awaits:
                rows = conn.execute(_LOCK_CHILDREN, {"ids": awaits}).all()
                found = {row[0]: Status(row[1]) for row in rows}
            conn.execute(_PARENT_RULE, {"ids": [job.id for _, _, job in waiting]})
            for i, change, job in waiting:
                awaited = parents.awaited_children(kids.get(job.id, ()), change.awaits, found)
                _add_edges(conn, job.id, awaited)
                assert change.ended_at is not None
                after = waits.start(job, WaitRule.ALL_ENDED, awaited, change.ended_at).job
                if after != job:
                    finished[i] = save_job(conn, job, after, change.ended_at)
        return Completed(finished, done.claimed)


def _add_edges(conn: Connection, waiter: uuid.UUID, awaited: Sequence[Ended]) -> None:
    """A parent's edges to ``awaited`` (after those it has), and the unended ones marked as
    awaited (their ends will be recorded)."""
    conn.execute(
        _ADD_EDGES,
        {
            "waiter": waiter,
            "awaited": [end.id for end in awaited],
            "ended": [end.status.value if end.status.is_finished else None for end in awaited],
        },
    )
    unended = [end.id for end in awaited if not end.status.is_finished]
    if unended:
        conn.execute(_MARK_AWAITED, {"ids": unended})


def _insert_waiter(
    conn: Connection, new: NewJob, awaited: Sequence[Ended], rule: WaitRule, now: datetime
) -> Job | None:
    """Insert the waiter :func:`jobs_core.waits.start` makes of ``new``, its edges, and mark the
    jobs it waits for; None (nothing written) if its dedup key is held."""
    payload, document = codec.encode_payload(new.payload)
    built = domain.new_job(dataclasses.replace(new, payload=document), uuid7(), now)
    job = waits.start(built, rule, awaited, now).job
    params: dict[str, Any] = {
        "id": job.id,
        "org_id": job.org_id,
        "type": job.type,
        "status": job.status.value,
        "payload": payload,
        "dedup_key": job.dedup_key,
        "requested_dedup_key": new.dedup_key,
        "dedup_scope": job.dedup_scope.value,
        "max_attempts": job.max_attempts,
        "now": now,
        "run_at": job.run_at,
        "priority": job.priority,
        "concurrency_key": job.concurrency_key,
        "parent_id": job.parent_id,
        "error": job.error,
        "finished_at": job.finished_at,
        "hook_due_at": domain.end_hook_due(job.status, now, by_worker=False),
        "wait_rule": rule.value,
        "trace_context": None if new.trace_context is None else bulk.context_json(new),
    }
    if conn.execute(_INSERT_WAITER, params).first() is None:
        return None
    conn.execute(
        _INSERT_EDGES,
        {
            "waiter": job.id,
            "awaited": [end.id for end in awaited],
            "ended": [end.status.value if end.status.is_finished else None for end in awaited],
        },
    )
    unended = [end.id for end in awaited if not end.status.is_finished]
    if unended:
        conn.execute(_MARK_AWAITED, {"ids": unended})
    return job
