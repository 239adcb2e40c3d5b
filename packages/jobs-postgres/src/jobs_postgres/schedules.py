"""The PostgreSQL schedule store: :class:`jobs_core.scheduling.ScheduleStore` on ``schedules``.

Exactly one job per tick, whatever the number of schedulers (invariant 11), holds by three
locks in depth:

1. a scheduler takes a due schedule with ``FOR UPDATE SKIP LOCKED``: two schedulers never work
   on the same schedule at once, and a row another one has just moved forward is re-checked
   against ``next_run_at <= now`` on its newest version (READ COMMITTED re-evaluation), so it is
   no longer due;
2. the jobs, the run records and the new ``next_run_at`` are written in that one transaction:
   all commit or none (a crash between them leaves the tick due, never half-fired);
3. ``schedule_runs`` has the primary key ``(schedule_id, tick)``: even a bug in 1 cannot commit
   a tick twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from jobs_core.domain import Job, NewJob
from jobs_core.quotas import schedules_exceeded
from jobs_core.schedules import (
    Firing,
    MissedPolicy,
    Schedule,
    ScheduleExists,
    ScheduleState,
)
from jobs_core.scheduling import CODE, Fired
from sqlalchemy import Connection, Engine, text

from jobs_postgres.errors import unavailable_as_store_error, unique_violation
from jobs_postgres.store import PostgresJobStore

_COLUMNS = (
    "id, org_id, name, job_type, payload, cron, timezone, enabled, missed, max_catchup, "
    "description, source, next_run_at, last_run_at, last_job_id, created_at, updated_at"
)

ADD = text(
    f"""INSERT INTO schedules (org_id, name, job_type, payload, cron, timezone, enabled, missed,
        max_catchup, description, source, next_run_at, created_at, updated_at)
    VALUES (:org_id, :name, :job_type, CAST(:payload AS jsonb), :cron, :timezone, :enabled,
        :missed, :max_catchup, :description, :source, :next_run_at, :now, :now)
    RETURNING {_COLUMNS}"""
)
# A tenant's count of run-time schedules, under a lock of the org's own (taken in the adding
# transaction, released at its end): two concurrent adds of one org count one after the other.
LOCK_ORG = text("SELECT pg_advisory_xact_lock(hashtextextended('jobs.schedules:' || :org_id, 0))")
COUNT_ORG = text("SELECT count(*) FROM schedules WHERE org_id = :org_id AND source = 'api'")
GET = text(f"SELECT {_COLUMNS} FROM schedules WHERE org_id = :org_id AND name = :name")
LIST_ORG = text(f"SELECT {_COLUMNS} FROM schedules WHERE org_id = :org_id ORDER BY name")
LIST_ALL = text(f"SELECT {_COLUMNS} FROM schedules ORDER BY org_id, name")
REPLACE = text(
    f"""UPDATE schedules SET name = :new_name, job_type = :job_type,
        payload = CAST(:payload AS jsonb), cron = :cron, timezone = :timezone,
        enabled = :enabled, missed = :missed, max_catchup = :max_catchup,
        description = :description, next_run_at = :next_run_at, updated_at = :now
    WHERE org_id = :org_id AND name = :name
    RETURNING {_COLUMNS}"""
)
REMOVE = text("DELETE FROM schedules WHERE org_id = :org_id AND name = :name")
SYNC = text(
    """INSERT INTO schedules AS s (org_id, name, job_type, payload, cron, timezone, enabled,
        missed, max_catchup, description, source, next_run_at, created_at, updated_at)
    VALUES (:org_id, :name, :job_type, CAST(:payload AS jsonb), :cron, :timezone, :enabled,
        :missed, :max_catchup, :description, 'code', :next_run_at, :now, :now)
    ON CONFLICT (org_id, name) DO UPDATE SET
        job_type = excluded.job_type, payload = excluded.payload, cron = excluded.cron,
        timezone = excluded.timezone, missed = excluded.missed,
        max_catchup = excluded.max_catchup, description = excluded.description,
        source = 'code',
        next_run_at = CASE WHEN (s.cron, s.timezone) IS DISTINCT FROM
                (excluded.cron, excluded.timezone) THEN excluded.next_run_at
            ELSE s.next_run_at END,
        updated_at = excluded.updated_at
    WHERE (s.job_type, s.payload, s.cron, s.timezone, s.missed, s.max_catchup,
           s.description, s.source)
        IS DISTINCT FROM (excluded.job_type, excluded.payload, excluded.cron,
           excluded.timezone, excluded.missed, excluded.max_catchup, excluded.description,
           excluded.source)"""
)
# Uses schedules_due_idx (enabled, by next_run_at). SKIP LOCKED: a schedule another scheduler
# is firing is its business; READ COMMITTED re-checks the WHERE on a row updated meanwhile.
TAKE_DUE = text(
    f"""SELECT {_COLUMNS} FROM schedules
    WHERE enabled AND next_run_at <= :now AND job_type = ANY(:types)
    ORDER BY next_run_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED"""
)
TAKE_ONE = text(
    f"SELECT {_COLUMNS} FROM schedules WHERE org_id = :org_id AND name = :name FOR UPDATE"
)
RECORD_RUN = text(
    """INSERT INTO schedule_runs (schedule_id, tick, job_id, fired_at)
    VALUES (:schedule_id, :tick, :job_id, :now)"""
)
ADVANCE = text(
    """UPDATE schedules SET next_run_at = :next_run_at,
        last_run_at = coalesce(:last_run_at, last_run_at),
        last_job_id = coalesce(:last_job_id, last_job_id)
    WHERE id = :id AND next_run_at = :expected"""
)
MARK_RUN = text("UPDATE schedules SET last_run_at = :now, last_job_id = :job_id WHERE id = :id")
TRIM_RUNS = text(
    """DELETE FROM schedule_runs AS r
    USING (
        SELECT schedule_id, tick FROM (
            SELECT schedule_id, tick,
                row_number() OVER (PARTITION BY schedule_id ORDER BY tick DESC) AS newer
            FROM schedule_runs
        ) AS ranked WHERE newer > :keep
    ) AS old
    WHERE r.schedule_id = old.schedule_id AND r.tick = old.tick"""
)
RUNS = text(
    """SELECT tick, job_id, fired_at FROM schedule_runs
    WHERE schedule_id = :schedule_id ORDER BY tick DESC LIMIT :limit"""
)

RUNS_KEPT = 1_000
"""Run records kept per schedule by the purge (the latest ones)."""


class PostgresScheduleStore:
    """Schedules in PostgreSQL; the jobs they fire go through :class:`PostgresJobStore` bound
    to the same transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._jobs = PostgresJobStore(engine)

    def add(
        self,
        schedule: Schedule,
        source: str,
        next_run_at: datetime,
        now: datetime,
        *,
        max_count: int | None = None,
    ) -> ScheduleState:
        """Store a new schedule; :class:`ScheduleExists` if the name is taken in the org;
        ``QuotaExceeded`` if the org holds ``max_count`` run-time schedules already."""
        try:
            with unavailable_as_store_error(), self._engine.begin() as conn:
                if max_count is not None:
                    org = {"org_id": schedule.org_id}
                    conn.execute(LOCK_ORG, org)
                    held = int(conn.execute(COUNT_ORG, org).scalar_one())
                    if held >= max_count:
                        raise schedules_exceeded(schedule.org_id, held, max_count)
                row = conn.execute(
                    ADD,
                    {**_params(schedule), "source": source, "next_run_at": next_run_at, "now": now},
                ).one()
        except Exception as error:
            if unique_violation(error):
                raise ScheduleExists(
                    f"a schedule named {schedule.name!r} already exists: pick another name, or "
                    "change that one"
                ) from None
            raise
        return _state(row)

    def get(self, org_id: str, name: str) -> ScheduleState | None:
        """The org's schedule of that name."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            row = conn.execute(GET, {"org_id": org_id, "name": name}).one_or_none()
        return None if row is None else _state(row)

    def list_schedules(self, org_id: str | None) -> list[ScheduleState]:
        """The org's schedules by name (every org's with None)."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            if org_id is None:
                rows = conn.execute(LIST_ALL).all()
            else:
                rows = conn.execute(LIST_ORG, {"org_id": org_id}).all()
        return [_state(row) for row in rows]

    def replace(
        self, org_id: str, name: str, schedule: Schedule, next_run_at: datetime, now: datetime
    ) -> ScheduleState | None:
        """Overwrite the org's schedule ``name``; None if absent."""
        params = {
            **_params(schedule),
            "org_id": org_id,
            "name": name,
            "new_name": schedule.name,
            "next_run_at": next_run_at,
            "now": now,
        }
        try:
            with unavailable_as_store_error(), self._engine.begin() as conn:
                row = conn.execute(REPLACE, params).one_or_none()
        except Exception as error:
            if unique_violation(error):
                raise ScheduleExists(
                    f"a schedule named {schedule.name!r} already exists: pick another name"
                ) from None
            raise
        return None if row is None else _state(row)

    def remove(self, org_id: str, name: str) -> bool:
        """Delete the org's schedule (its run records go with it)."""
        with unavailable_as_store_error(), self._engine.begin() as conn:
            return conn.execute(REMOVE, {"org_id": org_id, "name": name}).rowcount > 0

    def sync_declared(self, declared: Sequence[tuple[Schedule, datetime]], now: datetime) -> None:
        """Insert or refresh the schedules declared in code, in one transaction."""
        if not declared:
            return
        with unavailable_as_store_error(), self._engine.begin() as conn:
            for schedule, next_run_at in declared:
                conn.execute(SYNC, {**_params(schedule), "next_run_at": next_run_at, "now": now})

    def fire_due(
        self,
        now: datetime,
        types: Sequence[str],
        plan: Callable[[ScheduleState], Firing],
        make_job: Callable[[ScheduleState], NewJob],
        limit: int,
    ) -> list[Fired]:
        """Fire up to ``limit`` due schedules, one transaction each (see the module's doc)."""
        fired: list[Fired] = []
        while len(fired) < limit:
            with unavailable_as_store_error(), self._engine.begin() as conn:
                row = conn.execute(TAKE_DUE, {"now": now, "types": list(types)}).one_or_none()
                if row is None:
                    break
                fired.append(self._fire(conn, _state(row), plan, make_job, now))
        return fired

    def _fire(
        self,
        conn: Connection,
        state: ScheduleState,
        plan: Callable[[ScheduleState], Firing],
        make_job: Callable[[ScheduleState], NewJob],
        now: datetime,
    ) -> Fired:
        firing = plan(state)
        jobs = self._jobs.bound_to(conn)
        job_ids: list[uuid.UUID] = []
        for tick in firing.ticks:
            job = jobs.insert(make_job(state), now)
            if job is None:  # a schedule's job carries no dedup key: an insert never conflicts
                raise RuntimeError("the job store refused a scheduled job without a dedup key")
            conn.execute(
                RECORD_RUN, {"schedule_id": state.id, "tick": tick, "job_id": job.id, "now": now}
            )
            job_ids.append(job.id)
        moved = conn.execute(
            ADVANCE,
            {
                "id": state.id,
                "expected": state.next_run_at,
                "next_run_at": firing.next_run_at,
                "last_run_at": firing.ticks[-1] if firing.ticks else None,
                "last_job_id": job_ids[-1] if job_ids else None,
            },
        ).rowcount
        if moved != 1:  # pragma: no cover - the row lock makes this impossible
            raise RuntimeError(f"schedule {state.schedule.name!r} moved under its row lock")
        return Fired(
            state.schedule.org_id,
            state.schedule.name,
            firing.ticks,
            tuple(job_ids),
            firing.dropped,
            firing.next_run_at,
        )

    def fire_now(
        self, org_id: str, name: str, make_job: Callable[[ScheduleState], NewJob], now: datetime
    ) -> tuple[ScheduleState, Job] | None:
        """Enqueue the schedule's job now and record it as the last run."""
        with unavailable_as_store_error(), self._engine.begin() as conn:
            row = conn.execute(TAKE_ONE, {"org_id": org_id, "name": name}).one_or_none()
            if row is None:
                return None
            state = _state(row)
            job = self._jobs.bound_to(conn).insert(make_job(state), now)
            if job is None:  # pragma: no cover - no dedup key, no conflict
                raise RuntimeError("the job store refused a scheduled job without a dedup key")
            conn.execute(MARK_RUN, {"id": state.id, "now": now, "job_id": job.id})
        updated = self.get(org_id, name)
        return (updated or state), job

    def runs(self, schedule_id: uuid.UUID, limit: int = 20) -> list[tuple[datetime, uuid.UUID]]:
        """The latest fired ticks of a schedule and their jobs, newest first."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            rows = conn.execute(RUNS, {"schedule_id": schedule_id, "limit": limit}).all()
        return [(row.tick, row.job_id) for row in rows]

    def trim_runs(self, keep: int = RUNS_KEPT) -> int:
        """Delete the run records beyond the latest ``keep`` of each schedule; how many."""
        with unavailable_as_store_error(), self._engine.begin() as conn:
            return int(conn.execute(TRIM_RUNS, {"keep": keep}).rowcount)


def _params(schedule: Schedule) -> dict[str, Any]:
    return {
        "org_id": schedule.org_id,
        "name": schedule.name,
        "job_type": schedule.job_type,
        "payload": json.dumps(dict(schedule.payload), sort_keys=True),
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "enabled": schedule.enabled,
        "missed": schedule.missed.value,
        "max_catchup": schedule.max_catchup,
        "description": schedule.description,
    }


def _state(row: Any) -> ScheduleState:
    schedule = Schedule(
        name=row.name,
        org_id=row.org_id,
        job_type=row.job_type,
        cron=row.cron,
        timezone=row.timezone,
        payload=row.payload,
        enabled=row.enabled,
        missed=MissedPolicy(row.missed),
        max_catchup=row.max_catchup,
        description=row.description,
    )
    return ScheduleState(
        schedule=schedule,
        id=row.id,
        source=row.source,
        next_run_at=row.next_run_at,
        last_run_at=row.last_run_at,
        last_job_id=row.last_job_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


__all__ = ["CODE", "RUNS_KEPT", "PostgresScheduleStore"]
