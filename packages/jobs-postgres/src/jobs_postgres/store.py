"""The PostgreSQL job store: :class:`jobs_core.ports.JobStore` over SQLAlchemy Core + psycopg 3.

Each method is one statement of :mod:`jobs_postgres.sql` (claim, finish, insert and their bulk
forms included), on an autocommit connection: one round trip (:mod:`jobs_postgres.connections`);
the reads of a job and of a page of jobs are :class:`jobs_postgres.reads.JobReads`' (the CLI
runs them without the store, decision 0049).
The admin actions (cancel, retry, delete) lock the row, apply the pure transition of
:mod:`jobs_core.domain` and write it back, in one transaction (:mod:`jobs_postgres.rows`). The
worker registry is :mod:`jobs_postgres.worker_registry`. :meth:`PostgresJobStore.bound_to` gives
the store inside a caller's transaction: a module's rows and its job commit together.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from jobs_core import codec, domain, uuid7
from jobs_core.claims import ClaimPlan
from jobs_core.clock import ascending_uuid7s
from jobs_core.domain import AttemptRef, Job, NewJob, Patch, Status
from jobs_core.errors import DedupConflict
from jobs_core.flow import ClaimLimits, FairTurn
from jobs_core.ports import AHEAD_CAP, ClaimNext, Completed, WaitingFacts
from jobs_core.workers import live_after
from sqlalchemy import Connection, exc

from jobs_postgres import bulk, claims, flow, sql
from jobs_postgres.children import array_insert, children_of, has_children, is_child
from jobs_postgres.connections import Execute, Send
from jobs_postgres.errors import unique_violation
from jobs_postgres.job_rows import STATUS_OF, job_from_row
from jobs_postgres.operator_rows import OperatorRows
from jobs_postgres.overview_rows import OverviewRows
from jobs_postgres.pauses import TypePauseRows
from jobs_postgres.reads import JobReads
from jobs_postgres.recovery import RecoveryRows
from jobs_postgres.rows import (
    document_json,
    has_sweep_patches,
    locked_job,
    patches_json,
    save_job,
)
from jobs_postgres.waits import WaitRows
from jobs_postgres.worker_registry import WorkerRegistryRows

COPY_FROM = 2_000
"""The batch size from which :meth:`PostgresJobStore.insert_many` sends its rows with COPY."""
COPY_UNKEYED_FROM = 100
"""The batch size from which a batch without dedup keys is COPied straight into ``jobs``
(measured: 1.1x the array statement at 100 jobs, 1.6x at 1,000; even at 10 jobs)."""


class PostgresJobStore(
    RecoveryRows,
    WorkerRegistryRows,
    OperatorRows,
    TypePauseRows,
    OverviewRows,
    WaitRows,
    JobReads,
):
    """A :class:`~jobs_core.ports.JobStore` on the ``jobs`` table.

    Driver errors are translated at the boundary: a lost connection or a server restart raises
    :class:`jobs_core.StoreUnavailable` (retry later); a key held by another job is
    :class:`jobs_core.DedupConflict` (retry) or simply no insert (enqueue).
    """

    def bound_to(self, connection: Connection) -> PostgresJobStore:
        """This store inside the caller's transaction on ``connection``.

        Its methods never commit: the caller's commit publishes the jobs (and their NOTIFY),
        the caller's rollback leaves no job.
        """
        return PostgresJobStore(self._engine, connection=connection)

    # -- enqueue ------------------------------------------------------------------------------
    def insert(self, new: NewJob, now: datetime) -> Job | None:
        """Insert a queued job; None if its dedup key is held by another job of the org.

        The id is made here (:func:`jobs_core.uuid7`) and the job returned is the pure
        :func:`jobs_core.domain.new_job` of ``new``, exactly the row inserted: only the id
        comes back from the server. A connection lost under the call is retried once on a
        fresh one, which first looks for that id: a job is never inserted twice.
        """
        if new.parent_id is not None:  # a child (ctx.enqueue): its parent is written too
            return next(iter(self.insert_many([new], now)), None)
        job_id = uuid7()
        payload, document = codec.encode_payload(new.payload)
        params = {
            "id": job_id,
            "org_id": new.org_id,
            "type": new.type,
            "payload": payload,
            "dedup_key": new.dedup_key,
            "dedup_scope": new.dedup_scope.value,
            "max_attempts": new.max_attempts,
            "now": now,
            "run_at": new.run_at or now,
            "priority": new.priority,
            "concurrency_key": new.concurrency_key,
        }
        insert = sql.INSERT
        if new.trace_context is not None:  # tracing on (decision 0039)
            insert, params["trace_context"] = sql.INSERT_TRACED, bulk.context_json(new)

        def attempt(execute: Execute, retried: bool) -> bool:
            if not retried:
                return execute(insert, params) is not None
            if execute(sql.EXISTS_ID, {"id": job_id}) is not None:
                return True  # the first try committed before its connection was lost
            try:
                return execute(insert, params) is not None
            except psycopg.errors.UniqueViolation:
                # The key conflict does nothing: a unique violation is the primary key, the
                # first try committing (still running on a connection we lost) since EXISTS_ID.
                return True

        if not self._on_driver(attempt):
            return None
        # The payload as the row holds it (JSON's types), as a read of the row would give it.
        return domain.new_job(dataclasses.replace(new, payload=document), job_id, now)

    def insert_many(self, new: Sequence[NewJob], now: datetime) -> list[Job]:
        """Insert many jobs in one call; those whose key is held are skipped.

        The ids are made here (:func:`jobs_core.uuid7`, sorted so a batch runs in input order)
        and only they come back from the server: each job is the pure
        :func:`jobs_core.domain.new_job` of its spec, exactly the row inserted. Within the
        batch the first job with a key takes it. The jobs come back in input order.

        A batch of :data:`COPY_UNKEYED_FROM` jobs or more without dedup keys cannot conflict:
        it is COPied straight into ``jobs``. Otherwise, up to :data:`COPY_FROM` jobs go in one
        statement of array parameters; larger batches are sent with COPY into a temporary table
        first (twice the rate; decision 0004).
        """
        if not new:
            return []
        ids = ascending_uuid7s(len(new))
        children = is_child(new)  # at most CHILDREN_MAX: array parameters carry their parents
        if not children and len(new) >= COPY_UNKEYED_FROM and all(s.dedup_key is None for s in new):
            with self._transaction() as conn:
                return bulk.copy_into_jobs(conn, new, ids, now)
        encoded = [codec.encode_payload(n.payload) for n in new]
        payloads = [text for text, _ in encoded]
        # Each job as the row holds it (the payload in JSON's types), as a read would give it.
        new = [
            n if doc is n.payload else dataclasses.replace(n, payload=doc)
            for n, (_, doc) in zip(new, encoded, strict=True)
        ]
        if children or len(new) < COPY_FROM:
            rows = array_insert(self._rows, new, ids, payloads, now)
        else:
            with self._transaction() as conn:
                rows = bulk.copy_insert(conn, new, ids, payloads, now)
        keyed = set(rows[0][0] or ())
        kept = [
            (spec, job_id)
            for spec, job_id in zip(new, ids, strict=True)
            if spec.dedup_key is None or job_id in keyed
        ]
        return domain.new_jobs((spec for spec, _ in kept), (job_id for _, job_id in kept), now)

    def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
        """The job of the org that holds ``dedup_key`` now, if any."""
        rows = self._read(sql.FIND_BY_DEDUP_KEY, {"org_id": org_id, "dedup_key": dedup_key})
        return job_from_row(rows[0]) if rows else None

    # -- worker -------------------------------------------------------------------------------
    def claim(
        self,
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: ClaimLimits | None = None,
        turn: FairTurn | None = None,
    ) -> list[Job]:
        """Take up to ``limit`` due queued jobs, highest priority then oldest first (in fair
        order between orgs with ``turn``), that fit ``limits``: the plan's statement, one
        round trip; under limits, one short transaction of two (:mod:`jobs_postgres.claims`)."""
        return self._claim(ClaimPlan.of(limit, now, types, limits=limits, turn=turn))

    def _claim(self, plan: ClaimPlan) -> list[Job]:
        if plan.empty:
            return []
        if plan.limited:
            return self._claim_limited(plan, ()).claimed
        (statement,) = claims.statements(plan)
        rows = self._hot_rows(statement, claims.parameters(plan))
        return sorted((job_from_row(row) for row in rows), key=domain.claim_order)

    def _claim_limited(self, plan: ClaimPlan, patches: Sequence[Patch]) -> Completed:
        """The finish of ``patches`` (if any), then the claim under limits: lock candidates and
        their keys, then claim the ones that fit, counted in a snapshot taken after the keys are
        locked (decision 0015); one transaction, pipelined (``_pipelined``). The claim's
        statements come after the finish in it, so they count the places the finish freed; it
        passes over the patches' jobs (``:skipped``): a job re-queued is not claimed back by the
        same call."""
        candidates, admitted = claims.statements(plan, finish=bool(patches))
        params = claims.parameters(plan)
        if patches:
            params["skipped"] = [change.ref.job_id for change in patches]

        def run(send: Send) -> tuple[list[Any], list[Any]]:
            for setting in claims.PLANNER_SETTINGS:  # first: the finish is planned under them
                send(setting, {})
            finished = None
            if patches:
                finish = claims.finish(sweep=has_sweep_patches(patches))
                finished = send(finish, {"outcomes": patches_json(patches)})
            rows = send(candidates, params)()
            # Claimed already (types without a limit: ``pending`` NULL), or to admit.
            claimed = [row[1:] for row in rows if row[0] is None]
            ids = [row[0] for row in rows if row[0] is not None]
            if ids:
                claimed += send(admitted, {**params, "ids": ids})()
            return ([] if finished is None else finished()), claimed

        finished_rows, claimed_rows = self._pipelined(run)
        results: list[Job | None] = [None] * len(patches)
        for row in finished_rows:
            results[row[0]] = job_from_row(row[1:])
        claimed = sorted((job_from_row(row) for row in claimed_rows), key=domain.claim_order)
        return Completed(results, claimed)

    def waiting_facts(self, job: Job, now: datetime) -> WaitingFacts:
        """The counts behind "why is this job waiting?" (one statement)."""
        params = {
            "type": job.type,
            "key": job.concurrency_key,
            "now": now,
            "priority": job.priority,
            "created_at": job.created_at,
            "id": job.id,
            "cap": AHEAD_CAP,
            "live_after": live_after(now),
        }
        row = self._on_driver(lambda execute, _: execute(flow.waiting_facts(), params))
        starts = tuple(sorted(row[5] or (), reverse=True))
        counts = (int(row[0]), int(row[1]), int(row[2]), int(row[3]))
        return WaitingFacts(*counts, bool(row[4]), starts)

    def heartbeat(self, refs: Sequence[AttemptRef], now: datetime) -> set[uuid.UUID]:
        """:func:`jobs_core.domain.heartbeat` on held jobs (``heartbeat_at`` and
        ``progress.updated_at``); the ids still held."""
        if not refs:
            return set()
        rows = self._rows(
            sql.HEARTBEAT,
            {
                "ids": [r.job_id for r in refs],
                "leases": [r.lease for r in refs],
                "now": now,
                "beat": now.isoformat(),
            },
        )
        return {row[0] for row in rows}

    def save_progress(
        self,
        ref: AttemptRef,
        progress: dict[str, Any],
        now: datetime,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> bool:
        """:func:`jobs_core.domain.save_progress` on a held job (and its private checkpoint, if
        given, in the same statement); False if the lease is lost."""
        document = domain.heartbeat_progress(copy.deepcopy(progress), now)
        params: dict[str, Any] = {
            "id": ref.job_id,
            "lease": ref.lease,
            "progress": document_json(document),
            "now": now,
        }
        statement = sql.SAVE_PROGRESS
        if checkpoint is not None:
            params["checkpoint"] = document_json(dict(checkpoint))
            statement = sql.SAVE_PROGRESS_AND_CHECKPOINT
        with self._statement() as conn:
            result = conn.execute(statement, params)
            return bool(result.rowcount == 1)

    def checkpoint_of(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """The job's private checkpoint, or None."""
        rows = self._read(sql.CHECKPOINT_OF, {"id": job_id})
        return dict(rows[0][0]) if rows and rows[0][0] is not None else None

    def cancel_requested(self, refs: Sequence[AttemptRef]) -> set[uuid.UUID]:
        """The ids among held jobs whose cancellation has been requested."""
        if not refs:
            return set()
        rows = self._rows(
            sql.CANCEL_REQUESTED,
            {"ids": [r.job_id for r in refs], "leases": [r.lease for r in refs]},
        )
        return {row[0] for row in rows}

    def complete(
        self, patches: Sequence[Patch], *, claim_next: ClaimNext | None = None
    ) -> Completed:
        """Assign each patch to the row its attempt holds (fenced), then, with ``claim_next``,
        claim: in one statement (one round trip, one commit). A job re-queued by ``patches``
        is not claimed back by the same call.

        Under ``claim_next.limits`` the patches are written by the first statement of the
        claim's transaction (pipelined, decision 0046): the claim's statements count the places
        they freed, and pass over their jobs.

        Patches with children (decision 0038), or waiting for them (decision 0043): the same,
        then the children owed and the waiting parents' edges, in one transaction
        (:mod:`jobs_postgres.children`, :mod:`jobs_postgres.waits`); a batch without any runs
        as before."""
        if has_children(patches):
            if self._bound is None:
                with self._transaction() as conn:
                    return self.bound_to(conn).complete(patches, claim_next=claim_next)
            done = self._complete(patches, claim_next)
            owed = children_of(patches, done.finished)
            # Created at the end of their parents' attempts (one instant per batch).
            now = max((c.ended_at for c in patches if c.ended_at is not None), default=None)
            inserted = self.insert_many(owed, now) if owed and now is not None else []
            return self.wait_for_children(patches, done, inserted)
        return self._complete(patches, claim_next)

    def _complete(self, patches: Sequence[Patch], claim_next: ClaimNext | None) -> Completed:
        if claim_next is None:
            return Completed(self._finish(patches), [])
        plan = ClaimPlan.of(
            claim_next.limit,
            claim_next.now,
            claim_next.types,
            limits=claim_next.limits,
            turn=claim_next.turn,
        )
        if not patches:
            return Completed([], self._claim(plan))
        if plan.empty:
            return Completed(self._finish(patches), [])
        if plan.limited:
            return self._claim_limited(plan, patches)
        (statement,) = claims.statements(plan, finish=True, sweep=has_sweep_patches(patches))
        params = {**claims.parameters(plan), "outcomes": patches_json(patches)}
        results: list[Job | None] = [None] * len(patches)
        claimed = []
        for row in self._hot_rows(statement, params):
            if row[0] is None:
                claimed.append(job_from_row(row[1:]))
            else:
                results[row[0]] = job_from_row(row[1:])
        claimed.sort(key=domain.claim_order)
        return Completed(results, claimed)

    def _finish(self, patches: Sequence[Patch]) -> list[Job | None]:
        if not patches:
            return []
        results: list[Job | None] = [None] * len(patches)
        statement = claims.finish(sweep=has_sweep_patches(patches))
        for row in self._hot_rows(statement, {"outcomes": patches_json(patches)}):
            results[row[0]] = job_from_row(row[1:])
        return results

    # -- org-scoped reads (a job, a page of jobs: jobs_postgres.reads.JobReads) and actions --
    def stats(self, org_id: str) -> dict[Status, int]:
        """Job count per status for the org (every status present, zero included)."""
        counts = dict.fromkeys(Status, 0)
        for status, count in self._read(sql.STATS, {"org_id": org_id}):
            counts[STATUS_OF[status]] = int(count)
        return counts

    def cancel(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Queued → cancelled at once; running → cancellation requested.

        Raises :class:`~jobs_core.errors.InvalidTransition` for a finished job.
        """
        with self._transaction() as conn:
            job = locked_job(conn, org_id, job_id)
            if job is None:
                return None
            updated = domain.cancel(job, now)
            if updated is job:  # a request already made: nothing to write
                return job
            return save_job(conn, job, updated, now)

    def retry(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Failed/cancelled → queued with attempts 0 and the originally requested dedup key.

        Raises ``InvalidTransition`` for another status, ``DedupConflict`` if the key is held.
        """
        key: str | None = None
        try:
            with self._transaction() as conn:
                job = locked_job(conn, org_id, job_id)
                if job is None:
                    return None
                retried = domain.retry(job, now)
                key = retried.dedup_key
                if key is not None:
                    holder = conn.execute(
                        sql.FIND_BY_DEDUP_KEY, {"org_id": org_id, "dedup_key": key}
                    ).first()
                    if holder is not None:
                        raise DedupConflict(f"dedup key {key!r} is held by job {holder[0]}")
                return save_job(conn, job, retried, now)
        except exc.IntegrityError as error:
            if not unique_violation(error):
                raise
            # Another job took the key between the check and the write.
            raise DedupConflict(f"dedup key {key!r} is held by another job") from None

    def delete(self, org_id: str, job_id: uuid.UUID) -> bool:
        """Delete a finished job; False if absent. ``InvalidTransition`` if not finished."""
        with self._transaction() as conn:
            job = locked_job(conn, org_id, job_id)
            if job is None:
                return False
            domain.check_deletable(job)
            conn.execute(sql.DELETE, {"org_id": org_id, "id": job_id})
            return True
