"""The PostgreSQL job store: :class:`jobs_core.ports.JobStore` over SQLAlchemy Core + psycopg 3.

Each method is one statement of :mod:`jobs_postgres.sql` (claim, finish, insert and their bulk
forms included), run on an autocommit connection so it is its own transaction: one round trip.
The admin actions (cancel, retry, delete) lock the row, apply the pure transition of
:mod:`jobs_core.domain` and write it back, in one transaction.

:meth:`PostgresJobStore.bound_to` gives the same store inside a caller's transaction: a module
writes its domain rows and enqueues its job atomically (both commit or neither).
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from jobs_core import codec, domain, uuid7
from jobs_core.claims import ClaimPlan
from jobs_core.clock import ascending_uuid7s
from jobs_core.domain import AttemptRef, DedupScope, Job, NewJob, Patch, Status
from jobs_core.errors import DedupConflict
from jobs_core.flow import ClaimLimits, FairTurn
from jobs_core.listing import Elided
from jobs_core.ports import AHEAD_CAP, ClaimNext, Completed, JobFilter, WaitingFacts
from jobs_core.workers import WorkerInfo, live_after
from sqlalchemy import Connection, Engine, TextClause, exc

from jobs_postgres import claims, flow, sql
from jobs_postgres.errors import unavailable_as_store_error, unique_violation

COPY_FROM = 2_000
"""The batch size from which :meth:`PostgresJobStore.insert_many` sends its rows with COPY."""
COPY_UNKEYED_FROM = 100
"""The batch size from which a batch without dedup keys is COPied straight into ``jobs``
(measured: 1.1x the array statement at 100 jobs, 1.6x at 1,000; even at 10 jobs)."""

T = TypeVar("T")
Execute = Callable[[str, Mapping[str, Any]], Any]
"""Runs one statement (psycopg's ``%(name)s`` syntax); its first row or None."""

_STATUS = {status.value: status for status in Status}
_SCOPE = {scope.value: scope for scope in DedupScope}


class PostgresJobStore:
    """A :class:`~jobs_core.ports.JobStore` on the ``jobs`` table.

    Driver errors are translated at the boundary: a lost connection or a server restart raises
    :class:`jobs_core.StoreUnavailable` (retry later); a key held by another job is
    :class:`jobs_core.DedupConflict` (retry) or simply no insert (enqueue).
    """

    def __init__(self, engine: Engine, *, connection: Connection | None = None) -> None:
        self._engine = engine
        self._bound = connection
        # One statement per call needs no BEGIN/COMMIT round trips: run it in autocommit.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    @property
    def engine(self) -> Engine:
        """The engine this store runs on."""
        return self._engine

    def bound_to(self, connection: Connection) -> PostgresJobStore:
        """This store inside the caller's transaction on ``connection``.

        Its methods never commit: the caller's commit publishes the jobs (and their NOTIFY),
        the caller's rollback leaves no job.
        """
        return PostgresJobStore(self._engine, connection=connection)

    # -- connections --------------------------------------------------------------------------
    @contextmanager
    def _statement(self) -> Iterator[Connection]:
        """A connection for one self-contained statement."""
        with unavailable_as_store_error():
            if self._bound is not None:
                yield self._bound
            else:
                with self._autocommit.connect() as conn:
                    yield conn

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """A connection in a transaction for a read-lock-write sequence.

        Bound to a caller's connection, the sequence runs in a savepoint, so a refusal (a dedup
        conflict) leaves the caller's transaction usable.
        """
        with unavailable_as_store_error():
            if self._bound is not None:
                with self._bound.begin_nested():
                    yield self._bound
            else:
                with self._engine.begin() as conn:
                    yield conn

    def _rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[Any]:
        with self._statement() as conn:
            return list(conn.execute(statement, params).all())

    def _hot_rows(self, query: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one of the worker's per-job statements (claim, finish; psycopg syntax,
        :mod:`jobs_postgres.claims`), run on the psycopg connection of a pooled connection in
        autocommit: one round trip, without SQLAlchemy's execution and result layers, which
        took half the worker's CPU per job (bench/NOTES.md §3).

        A connection found broken is invalidated (the pool opens a new one), and the error
        is ``StoreUnavailable`` as on every other path. Inside a caller's transaction the
        statement runs on the caller's connection.
        """
        if self._bound is not None:
            bound = self._bound
            with self._statement():
                return _all(bound.exec_driver_sql(query, dict(params)))
        with unavailable_as_store_error():
            pooled = self._engine.raw_connection()
            try:
                driver = pooled.driver_connection
                assert isinstance(driver, psycopg.Connection)
                driver.autocommit = True
                try:
                    with driver.cursor() as cursor:
                        cursor.execute(query, params)
                        # every hot statement returns rows (``description`` would build a
                        # Column per column per call: a sixth of the completer's CPU)
                        return cursor.fetchall()
                except psycopg.Error as error:
                    if driver.broken or driver.closed:
                        pooled.invalidate(error)
                    raise
                finally:
                    try:
                        if not (driver.broken or driver.closed):
                            driver.autocommit = False  # as the pool lends it to everyone else
                    except psycopg.Error:
                        # interrupted mid-statement: never pool it in autocommit, a
                        # transaction begun on it later would not be one
                        pooled.invalidate()
            finally:
                pooled.close()

    def _retried(self, run: Callable[[Connection, bool], T]) -> T:
        """``run(connection, retried)`` on an autocommit connection, once more on a fresh one
        if the pooled connection turns out lost (the server dropped it an instant ago, or
        without a word: the checkout check of ``create_engine`` catches the others).

        Only for calls that may run twice: reads, and an insert whose caller-made id tells
        whether the first try committed (``retried`` is then True). Never on a caller's
        connection: its transaction is gone with it.
        """
        if self._bound is not None:
            with unavailable_as_store_error():
                return run(self._bound, False)
        with unavailable_as_store_error():
            conn = self._autocommit.connect()
            try:
                return run(conn, False)
            except exc.DBAPIError as error:
                if not error.connection_invalidated:
                    raise
            finally:
                conn.close()
            with self._autocommit.connect() as conn:
                return run(conn, True)

    def _on_driver(self, run: Callable[[Execute, bool], T]) -> T:
        """``run(execute, retried)``, where ``execute(query, params)`` runs a statement of
        psycopg's syntax and gives its first row: on the pooled psycopg connection itself in
        autocommit (none of SQLAlchemy's execution machinery: for the hottest calls), retried
        as :meth:`_retried`; on a caller's connection, through SQLAlchemy (its transaction).
        """
        with unavailable_as_store_error():
            if self._bound is not None:
                bound = self._bound
                return run(
                    lambda query, params: bound.exec_driver_sql(query, params).first(), False
                )
            for retried in (False, True):
                pooled = self._engine.raw_connection()
                driver = pooled.driver_connection
                assert isinstance(driver, psycopg.Connection)
                try:
                    driver.autocommit = True
                    try:
                        return run(_first_row_on(driver), retried)
                    finally:
                        try:
                            if not driver.broken:
                                driver.autocommit = False  # as the pool lends it to others
                        except psycopg.Error:
                            # (interrupted mid-statement) never pool it in autocommit: a
                            # transaction begun on it later would not be one
                            pooled.invalidate()
                except psycopg.Error:
                    if retried or not driver.broken:
                        raise
                    pooled.invalidate()  # lost: try again once on a fresh connection
                finally:
                    pooled.close()
            raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, statement: TextClause, params: Mapping[str, Any]) -> list[Any]:
        """The rows of a read-only statement (retried once on a lost connection)."""
        return self._retried(lambda conn, _: list(conn.execute(statement, params).all()))

    # -- enqueue ------------------------------------------------------------------------------
    def insert(self, new: NewJob, now: datetime) -> Job | None:
        """Insert a queued job; None if its dedup key is held by another job of the org.

        The id is made here (:func:`jobs_core.uuid7`) and the job returned is the pure
        :func:`jobs_core.domain.new_job` of ``new``, exactly the row inserted: only the id
        comes back from the server. A connection lost under the call is retried once on a
        fresh one, which first looks for that id: a job is never inserted twice.
        """
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

        def attempt(execute: Execute, retried: bool) -> bool:
            if not retried:
                return execute(sql.INSERT, params) is not None
            if execute(sql.EXISTS_ID, {"id": job_id}) is not None:
                return True  # the first try committed before its connection was lost
            try:
                return execute(sql.INSERT, params) is not None
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
        encoded = [codec.encode_payload(n.payload) for n in new]
        payloads = [text for text, _ in encoded]
        # Each job as the row holds it (the payload in JSON's types), as a read would give it.
        new = [
            n if doc is n.payload else dataclasses.replace(n, payload=doc)
            for n, (_, doc) in zip(new, encoded, strict=True)
        ]
        if len(new) >= COPY_UNKEYED_FROM and all(spec.dedup_key is None for spec in new):
            self._copy_into_jobs(new, ids, payloads, now)
            return domain.new_jobs(new, ids, now)
        if len(new) < COPY_FROM:
            rows = self._rows(
                sql.INSERT_MANY,
                {
                    "ids": ids,
                    "org_ids": [n.org_id for n in new],
                    "types": [n.type for n in new],
                    "payloads": payloads,
                    "dedup_keys": [n.dedup_key for n in new],
                    "dedup_scopes": [n.dedup_scope.value for n in new],
                    "max_attempts": [n.max_attempts for n in new],
                    "run_ats": [n.run_at for n in new],
                    "priorities": [n.priority for n in new],
                    "concurrency_keys": [n.concurrency_key for n in new],
                    "now": now,
                },
            )
        else:
            rows = self._copy_insert(new, ids, payloads, now)
        keyed = set(rows[0][0] or ())
        kept = [
            (spec, job_id)
            for spec, job_id in zip(new, ids, strict=True)
            if spec.dedup_key is None or job_id in keyed
        ]
        return domain.new_jobs((spec for spec, _ in kept), (job_id for _, job_id in kept), now)

    def _copy_into_jobs(
        self, new: Sequence[NewJob], ids: list[uuid.UUID], payloads: list[str], now: datetime
    ) -> None:
        """COPY a batch without dedup keys straight into ``jobs``, then its notifications."""
        with self._transaction() as conn:
            driver = conn.connection.driver_connection
            assert isinstance(driver, psycopg.Connection)
            with driver.cursor() as cursor:
                with cursor.copy(sql.COPY_JOBS) as copy:
                    copy.set_types(sql.COPY_JOBS_TYPES)
                    for job_id, spec, payload in zip(ids, new, payloads, strict=True):
                        copy.write_row(
                            (
                                job_id,
                                spec.org_id,
                                spec.type,
                                b"\x01" + payload.encode(),  # jsonb's binary form, version 1
                                spec.dedup_scope.value,
                                spec.max_attempts,
                                now,
                                spec.run_at or now,
                                spec.priority,
                                spec.concurrency_key,
                            )
                        )
                cursor.execute(sql.NOTIFY_INSERTED)

    def _copy_insert(
        self, new: Sequence[NewJob], ids: list[uuid.UUID], payloads: list[str], now: datetime
    ) -> list[Any]:
        table = f"jobs_incoming_{secrets.token_hex(6)}"
        with self._transaction() as conn:
            conn.execute(sql.create_incoming(table))
            driver = conn.connection.driver_connection
            assert isinstance(driver, psycopg.Connection)
            with driver.cursor() as cursor, cursor.copy(sql.copy_incoming(table)) as copy:
                copy.set_types([kind for _, kind in sql.INCOMING_COLUMNS])
                for job_id, spec, payload in zip(ids, new, payloads, strict=True):
                    copy.write_row(
                        (
                            job_id,
                            spec.org_id,
                            spec.type,
                            payload,
                            spec.dedup_key,
                            spec.dedup_scope.value,
                            spec.max_attempts,
                            spec.run_at,
                            spec.priority,
                            spec.concurrency_key,
                        )
                    )
            rows = list(conn.execute(sql.insert_from_incoming(table), {"now": now}).all())
            conn.execute(sql.drop_incoming(table))
            return rows

    def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
        """The job of the org that holds ``dedup_key`` now, if any."""
        rows = self._read(sql.FIND_BY_DEDUP_KEY, {"org_id": org_id, "dedup_key": dedup_key})
        return _job(rows[0]) if rows else None

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

    def _claim(self, plan: ClaimPlan, skipped: Sequence[uuid.UUID] = ()) -> list[Job]:
        if plan.empty:
            return []
        if plan.limited:
            return self._claim_limited(plan, skipped)
        (statement,) = claims.statements(plan)
        rows = self._hot_rows(statement, claims.parameters(plan))
        return sorted((_job(row) for row in rows), key=domain.claim_order)

    def _claim_limited(self, plan: ClaimPlan, skipped: Sequence[uuid.UUID]) -> list[Job]:
        """The claim under concurrency limits: lock candidates and their keys, then claim the
        ones that fit, counted in a snapshot taken after the keys are locked (decision 0015).
        ``skipped``: jobs a finish just re-queued, never claimed back by the same call."""
        candidates, admitted = claims.statements(plan, finish=bool(skipped))
        params = claims.parameters(plan)
        if skipped:
            params["skipped"] = list(skipped)

        def run(execute: Callable[[str, Mapping[str, Any]], list[Any]]) -> list[Any]:
            execute(claims.PLANNER, {})
            ids = [row[0] for row in execute(candidates, params)]
            if not ids:
                return []
            return execute(admitted, {**params, "ids": ids})

        rows = self._in_transaction(run)
        return sorted((_job(row) for row in rows), key=domain.claim_order)

    def _in_transaction(
        self, run: Callable[[Callable[[str, Mapping[str, Any]], list[Any]]], T]
    ) -> T:
        """``run(execute)`` in one transaction, ``execute(query, params)`` giving the rows of a
        statement in psycopg's syntax: on a pooled psycopg connection (committed at the end),
        or in a savepoint of the caller's transaction."""
        with unavailable_as_store_error():
            if self._bound is not None:
                bound = self._bound
                with bound.begin_nested():
                    return run(lambda query, p: _all(bound.exec_driver_sql(query, p)))
            pooled = self._engine.raw_connection()
            try:
                driver = pooled.driver_connection
                assert isinstance(driver, psycopg.Connection)
                try:
                    with driver.transaction():
                        return run(lambda query, p: _fetched(driver.execute(query, p or None)))
                except psycopg.Error as error:
                    if driver.broken or driver.closed:
                        pooled.invalidate(error)
                    raise
            finally:
                pooled.close()

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
        return WaitingFacts(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    # -- workers ------------------------------------------------------------------------------
    def register_worker(self, worker: WorkerInfo) -> None:
        """Record a worker (and forget those silent for too long)."""
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "types": list(worker.types),
            "concurrency": worker.concurrency,
            "started_at": worker.started_at,
            "last_seen_at": worker.last_seen_at,
            "live_after": live_after(worker.last_seen_at),
        }

        def run(execute: Callable[[str, Mapping[str, Any]], list[Any]]) -> None:
            execute(flow.FORGET_SILENT + " RETURNING id", params)
            execute(flow.REGISTER + " RETURNING id", params)

        self._in_transaction(run)

    def worker_seen(self, worker_id: uuid.UUID, now: datetime) -> bool:
        """Refresh a worker's ``last_seen_at``; False if it is not registered (any more)."""
        row = self._on_driver(lambda execute, _: execute(flow.SEEN, {"id": worker_id, "now": now}))
        return row is not None

    def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove a worker that stops."""
        self._on_driver(
            lambda execute, _: execute(flow.UNREGISTER + " RETURNING id", {"id": worker_id})
        )

    def live_workers(self, now: datetime) -> list[WorkerInfo]:
        """The live workers, oldest first (the silent ones are forgotten)."""
        params = {"live_after": live_after(now)}

        def run(execute: Callable[[str, Mapping[str, Any]], list[Any]]) -> list[Any]:
            execute(flow.FORGET_SILENT + " RETURNING id", params)
            return execute(flow.LIVE, params)

        return [
            WorkerInfo(row[0], row[1], row[2], tuple(row[3]), row[4], row[5], row[6])
            for row in self._in_transaction(run)
        ]

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
            "progress": _document_json(document),
            "now": now,
        }
        statement = sql.SAVE_PROGRESS
        if checkpoint is not None:
            params["checkpoint"] = _document_json(dict(checkpoint))
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

        Under ``claim_next.limits`` the patches commit first, then the claim runs as
        :meth:`claim` does (the places the patches freed are counted as free)."""
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
            finished = self._finish(patches)
            requeued = [j.id for j in finished if j is not None and j.status is Status.QUEUED]
            return Completed(finished, self._claim(plan, requeued))
        (statement,) = claims.statements(plan, finish=True, sweep=_sweeping(patches))
        params = {**claims.parameters(plan), "outcomes": _patches_json(patches)}
        results: list[Job | None] = [None] * len(patches)
        claimed = []
        for row in self._hot_rows(statement, params):
            if row[0] is None:
                claimed.append(_job(row[1:]))
            else:
                results[row[0]] = _job(row[1:])
        claimed.sort(key=domain.claim_order)
        return Completed(results, claimed)

    def _finish(self, patches: Sequence[Patch]) -> list[Job | None]:
        if not patches:
            return []
        results: list[Job | None] = [None] * len(patches)
        statement = claims.finish(sweep=_sweeping(patches))
        for row in self._hot_rows(statement, {"outcomes": _patches_json(patches)}):
            results[row[0]] = _job(row[1:])
        return results

    def take_end_hooks(
        self, types: Sequence[str], limit: int, now: datetime, retry_at: datetime
    ) -> list[Job]:
        """Up to ``limit`` jobs of ``types`` whose end hook is due, each due again at
        ``retry_at`` (SKIP LOCKED: none to two callers)."""
        if limit <= 0 or not types:
            return []
        rows = self._rows(
            sql.TAKE_END_HOOKS,
            {"types": list(types), "limit": limit, "now": now, "retry_at": retry_at},
        )
        return sorted((_job(row) for row in rows), key=lambda job: (job.finished_at, job.id))

    def end_hooks_done(self, jobs: Sequence[Job]) -> None:
        """Clear the due hooks of ``jobs`` that still have the same ending."""
        if not jobs:
            return
        with self._statement() as conn:
            conn.execute(
                sql.END_HOOKS_DONE,
                {"ids": [job.id for job in jobs], "ends": [job.finished_at for job in jobs]},
            )

    def find_stale(self, stale_before: datetime, limit: int) -> list[Job]:
        """Running jobs whose last sign of life is older than ``stale_before``."""
        if limit <= 0:
            return []
        rows = self._rows(sql.FIND_STALE, {"stale_before": stale_before, "limit": limit})
        return [_job(row) for row in rows]

    # -- org-scoped reads and actions ---------------------------------------------------------
    def get(self, org_id: str, job_id: uuid.UUID) -> Job | None:
        """The org's job, or None."""
        rows = self._read(sql.GET, {"org_id": org_id, "id": job_id})
        return _job(rows[0]) if rows else None

    def list_jobs(self, org_id: str, query: JobFilter) -> list[Job]:
        """The org's jobs matching ``query``, newest first."""
        if query.limit <= 0:
            return []
        statuses = None if query.statuses is None else sorted(s.value for s in query.statuses)
        cap = query.field_bytes
        statement = sql.list_jobs(
            org_id, statuses, query.type, query.before, query.limit, field_bytes=cap
        )
        if cap is None:
            return self._retried(lambda conn, _: [_job(row) for row in conn.execute(statement)])
        return self._retried(lambda conn, _: [_listed(row) for row in conn.execute(statement)])

    def stats(self, org_id: str) -> dict[Status, int]:
        """Job count per status for the org (every status present, zero included)."""
        counts = dict.fromkeys(Status, 0)
        for status, count in self._read(sql.STATS, {"org_id": org_id}):
            counts[_STATUS[status]] = int(count)
        return counts

    def cancel(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Queued → cancelled at once; running → cancellation requested.

        Raises :class:`~jobs_core.errors.InvalidTransition` for a finished job.
        """
        with self._transaction() as conn:
            job = _locked(conn, org_id, job_id)
            if job is None:
                return None
            updated = domain.cancel(job, now)
            if updated is job:  # a request already made: nothing to write
                return job
            return _save(conn, job, updated, now)

    def retry(self, org_id: str, job_id: uuid.UUID, now: datetime) -> Job | None:
        """Failed/cancelled → queued with attempts 0 and the originally requested dedup key.

        Raises ``InvalidTransition`` for another status, ``DedupConflict`` if the key is held.
        """
        key: str | None = None
        try:
            with self._transaction() as conn:
                job = _locked(conn, org_id, job_id)
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
                return _save(conn, job, retried, now)
        except exc.IntegrityError as error:
            if not unique_violation(error):
                raise
            # Another job took the key between the check and the write.
            raise DedupConflict(f"dedup key {key!r} is held by another job") from None

    def delete(self, org_id: str, job_id: uuid.UUID) -> bool:
        """Delete a finished job; False if absent. ``InvalidTransition`` if not finished."""
        with self._transaction() as conn:
            job = _locked(conn, org_id, job_id)
            if job is None:
                return False
            domain.check_deletable(job)
            conn.execute(sql.DELETE, {"org_id": org_id, "id": job_id})
            return True

    # -- operator reads across orgs -----------------------------------------------------------
    def get_any_org(self, job_id: uuid.UUID) -> Job | None:
        """The job with this id, whichever org owns it (index: the primary key)."""
        rows = self._read(sql.GET_ANY_ORG, {"id": job_id})
        return _job(rows[0]) if rows else None

    def list_all_orgs(self, query: JobFilter) -> list[Job]:
        """The jobs of every org matching ``query``, newest first, in one statement."""
        if query.limit <= 0:
            return []
        statuses = None if query.statuses is None else sorted(s.value for s in query.statuses)
        statement = sql.list_jobs(None, statuses, query.type, query.before, query.limit)
        return self._retried(lambda conn, _: [_job(row) for row in conn.execute(statement)])


# -- rows -------------------------------------------------------------------------------------


_AT = {name: index for index, name in enumerate(sql.COLUMNS)}
_FIELDS = tuple(field.name for field in dataclasses.fields(Job))
if set(_FIELDS) != set(sql.COLUMNS):  # pragma: no cover - a schema change without the model's
    raise RuntimeError("the columns of jobs must be the fields of jobs_core.Job")
_ORDER = tuple(_AT[name] for name in _FIELDS)
_STATUS_AT = _FIELDS.index("status")
_SCOPE_AT = _FIELDS.index("dedup_scope")


def _job(row: Sequence[Any]) -> Job:
    """A ``jobs`` row (columns in :data:`sql.COLUMNS` order) as a :class:`Job`.

    Positional, in the order of Job's fields: the claim and the finish build one per job on
    the worker's hot path, where a dict of keyword arguments per row showed in the profiles.
    """
    if len(row) != len(_ORDER):
        raise ValueError(f"a jobs row has {len(_ORDER)} columns, not {len(row)}")
    values = [row[index] for index in _ORDER]
    values[_STATUS_AT] = _STATUS[values[_STATUS_AT]]
    values[_SCOPE_AT] = _SCOPE[values[_SCOPE_AT]]
    return Job(*values)


def _listed(row: Sequence[Any]) -> Job:
    """A row of a bounded list (:func:`sql.list_jobs` with ``field_bytes``): the job, with its
    values too large to list as :class:`~jobs_core.listing.Elided`."""
    width = len(sql.COLUMNS)
    job = _job(row[:width])
    elided = {
        name: Elided(int(size))
        for name, size in zip(sql.LISTED_SIZES, row[width:], strict=True)
        if size is not None
    }
    return dataclasses.replace(job, **elided) if elided else job  # type: ignore[arg-type]


def _locked(conn: Connection, org_id: str, job_id: uuid.UUID) -> Job | None:
    row = conn.execute(sql.GET_FOR_UPDATE, {"org_id": org_id, "id": job_id}).first()
    return None if row is None else _job(row)


_SAVED = (
    "status",
    "attempts",
    "dedup_key",
    "run_at",
    "error",
    "started_at",
    "finished_at",
    "cancel_requested_at",
    "lease",
    "snoozes",
)
"""The columns sql.SAVE writes: every column an admin transition of the domain changes."""


def _save(conn: Connection, before: Job, after: Job, now: datetime) -> Job:
    """Write ``after`` (the domain's transition of the locked row ``before`` at ``now``) back,
    with the end hook's marker the core gives for it (:func:`jobs_core.domain.end_hook_due`: no
    worker ended the job)."""
    changed = {
        f.name for f in dataclasses.fields(Job) if getattr(before, f.name) != getattr(after, f.name)
    }
    if not changed <= set(_SAVED):  # a new domain rule this statement does not know yet
        raise RuntimeError(f"sql.SAVE does not write {sorted(changed - set(_SAVED))}")
    params: dict[str, Any] = {name: getattr(after, name) for name in _SAVED}
    params["status"] = after.status.value
    params["id"] = after.id
    params["hook_due_at"] = domain.end_hook_due(after.status, now, by_worker=False)
    return _job(conn.execute(sql.SAVE, params).one())


def _sweeping(patches: Sequence[Patch]) -> bool:
    """Whether a batch holds sweep patches (``seen_at``: taken only if their rows are free)."""
    return any(change.seen_at is not None for change in patches)


def _patches_json(patches: Sequence[Patch]) -> str:
    """The ``:outcomes`` parameter of the finish: each patch's columns as given, ``ord`` its
    input index (claims._OUTCOME), sorted by job id: the finish locks its rows in the order it
    reads them (decision 0027). Only the report is a handler's document (normalised by the
    codec); the rest is text, numbers and nulls built here, encoded as they are.

    The same attempt twice in a batch: the first patch wins, as applied in order (after it the
    job is no longer running under that lease)."""
    first: dict[uuid.UUID, tuple[int, Patch]] = {}
    for ord_, change in enumerate(patches):
        first.setdefault(change.ref.job_id, (ord_, change))
    batch = []
    for job_id in sorted(first):
        ord_, change = first[job_id]
        ref = change.ref
        batch.append(
            {
                "ord": ord_,
                "id": str(ref.job_id),
                "lease": str(ref.lease),
                "status": change.status.value,
                "attempts": change.attempts,
                "snoozes": change.snoozes,
                "run_at": change.run_at.isoformat(),
                "error": change.error,
                "report": None if change.report is None else codec.document(change.report),
                "finished_at": _instant(change.finished_at),
                "dedup_key": change.dedup_key,
                "seen_at": _instant(change.seen_at),
                "hook_due_at": _instant(change.hook_due_at),
            }
        )
    return codec.encode_plain(batch)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _all(result: Any) -> list[Any]:
    """The rows of a SQLAlchemy result; none for a statement that returns none (SET)."""
    return list(result.all()) if result.returns_rows else []


def _fetched(cursor: Any) -> list[Any]:
    """The rows of a psycopg cursor; none for a statement that returns none (SET)."""
    return list(cursor.fetchall()) if cursor.description is not None else []


def _first_row_on(driver: psycopg.Connection[Any]) -> Execute:
    """:data:`Execute` on a psycopg connection."""

    def execute(query: str, params: Mapping[str, Any]) -> Any:
        return driver.execute(query, params).fetchone()

    return execute


def _document_json(document: object) -> str:
    """A report or progress document as JSON (:mod:`jobs_core.codec`: never refused; what a
    payload would refuse is kept as text)."""
    return codec.encode_document(document)
