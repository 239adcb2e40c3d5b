"""The use cases of schedules: create, change, pause, remove, run now, and fire what is due.

The API, the CLI and the scheduler loop of the worker call these; the rules are the pure
functions of :mod:`jobs_core.schedules`, applied by a :class:`ScheduleStore` under a row lock in
the transaction that enqueues the jobs.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from jobs_core.clock import SystemClock
from jobs_core.domain import Job, NewJob
from jobs_core.errors import PayloadInvalid, StoreUnavailable, UnknownJobType
from jobs_core.ports import Clock
from jobs_core.registry import Registry
from jobs_core.schedules import (
    Cron,
    Firing,
    MissedPolicy,
    Schedule,
    ScheduleDeclared,
    ScheduleInvalid,
    ScheduleNotFound,
    ScheduleState,
    first_run_at,
    plan_firing,
    validate_schedule,
)

if TYPE_CHECKING:
    from jobs_core.quota_service import QuotaService

log = logging.getLogger("jobs.scheduler")

CODE = "code"
API = "api"


@dataclass(frozen=True, slots=True)
class Fired:
    """One schedule fired by a scheduler pass: the ticks it enqueued and their jobs."""

    org_id: str
    name: str
    ticks: tuple[datetime, ...]
    job_ids: tuple[uuid.UUID, ...]
    dropped: int
    next_run_at: datetime


class ScheduleStore(Protocol):
    """Where schedules live. Reads and changes are org-scoped; ``fire_due`` is the scheduler's."""

    def add(
        self,
        schedule: Schedule,
        source: str,
        next_run_at: datetime,
        now: datetime,
        *,
        max_count: int | None = None,
    ) -> ScheduleState:
        """Store a new schedule; :class:`~jobs_core.schedules.ScheduleExists` if the org has
        one of that name. With ``max_count``, :class:`~jobs_core.quotas.QuotaExceeded`
        (:func:`~jobs_core.quotas.schedules_exceeded`) if the org already holds that many
        run-time schedules, counted and inserted atomically (concurrent adds cannot pass it)."""
        ...

    def get(self, org_id: str, name: str) -> ScheduleState | None:
        """The org's schedule of that name."""
        ...

    def list_schedules(self, org_id: str | None) -> list[ScheduleState]:
        """The org's schedules by name (every org's with None: an operator's view)."""
        ...

    def replace(
        self, org_id: str, name: str, schedule: Schedule, next_run_at: datetime, now: datetime
    ) -> ScheduleState | None:
        """Overwrite the org's schedule ``name`` (which may be renamed); None if absent."""
        ...

    def remove(self, org_id: str, name: str) -> bool:
        """Delete the org's schedule; False if absent."""
        ...

    def sync_declared(self, declared: Sequence[tuple[Schedule, datetime]], now: datetime) -> None:
        """Insert or update the schedules declared in code (``source='code'``). An existing
        row keeps its ``enabled`` (an operator's pause survives a restart) and its
        ``next_run_at`` unless the cron expression or the time zone changed."""
        ...

    def fire_due(
        self,
        now: datetime,
        types: Sequence[str],
        plan: Callable[[ScheduleState], Firing],
        make_job: Callable[[ScheduleState], NewJob],
        limit: int,
    ) -> list[Fired]:
        """For each enabled schedule of ``types`` due at ``now`` (at most ``limit``), in its
        own transaction: lock it (skipping those another scheduler holds), apply ``plan``,
        insert one job per tick and a run record per tick, move ``next_run_at``. A tick is
        never enqueued twice, whatever the number of concurrent callers."""
        ...

    def fire_now(
        self, org_id: str, name: str, make_job: Callable[[ScheduleState], NewJob], now: datetime
    ) -> tuple[ScheduleState, Job] | None:
        """Enqueue one job for the schedule at once (its ticks are untouched); None if absent."""
        ...


class ScheduleService:
    """The schedule use cases over one store, one registry, one cron reader and one clock."""

    def __init__(
        self,
        store: ScheduleStore,
        registry: Registry,
        cron: Cron,
        clock: Clock | None = None,
        quotas: QuotaService | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.cron = cron
        self.clock: Clock = clock or SystemClock()
        self.quotas = quotas
        """The scheduler's quotas: a tenant's ticks fire only within its queued quota."""

    # -- operator and org actions ---------------------------------------------------------------
    def create(
        self, schedule: Schedule, *, quotas: QuotaService | None = None, operator: bool = False
    ) -> ScheduleState:
        """Store a new run-time schedule (validated: cron, zone, type, payload).

        With ``quotas`` (a tenant's request), under the org's quotas too: its count of
        schedules, and its shortest interval unless ``operator`` or the type is internal."""
        self._validate(schedule)
        max_count = self._quota_checks(schedule, quotas, operator)
        now = self.clock.now()
        return self.store.add(
            schedule, API, first_run_at(schedule, now, self.cron), now, max_count=max_count
        )

    def _quota_checks(
        self, schedule: Schedule, quotas: QuotaService | None, operator: bool
    ) -> int | None:
        if quotas is None:
            return None
        internal = not self.registry.get(schedule.job_type).public
        return quotas.check_schedule(schedule, self.cron, exempt=operator or internal)

    def get(self, org_id: str, name: str) -> ScheduleState:
        """The org's schedule; :class:`ScheduleNotFound` if absent."""
        state = self.store.get(org_id, name)
        if state is None:
            raise ScheduleNotFound(f"no schedule named {name!r}: see the list of schedules")
        return state

    def list_schedules(self, org_id: str | None) -> list[ScheduleState]:
        """The org's schedules (every org's with None)."""
        return self.store.list_schedules(org_id)

    def update(
        self,
        org_id: str,
        name: str,
        changes: Mapping[str, Any],
        *,
        quotas: QuotaService | None = None,
        operator: bool = False,
    ) -> ScheduleState:
        """Change fields of a run-time schedule. A schedule declared in code changes only its
        ``enabled`` flag here (the rest comes from the code at each start). With ``quotas``, a
        new cron expression, zone or type is held to the org's shortest interval (as
        :meth:`create`)."""
        state = self.get(org_id, name)
        allowed = {f.name for f in dataclasses.fields(Schedule)} - {"org_id"}
        unknown = set(changes) - allowed
        if unknown:
            raise ScheduleInvalid(f"cannot change {sorted(unknown)}: fields are {sorted(allowed)}")
        if state.source == CODE and set(changes) - {"enabled"}:
            raise ScheduleDeclared(
                f"schedule {name!r} is declared in code: change it there (only pause and "
                "resume apply at run time)"
            )
        try:
            updated = dataclasses.replace(state.schedule, **changes)
        except ScheduleInvalid:
            raise
        except (TypeError, ValueError) as error:
            raise ScheduleInvalid(str(error)) from None
        self._validate(updated)
        if (updated.cron, updated.timezone, updated.job_type) != (
            state.schedule.cron,
            state.schedule.timezone,
            state.schedule.job_type,
        ):
            self._quota_checks(updated, quotas, operator)
        now = self.clock.now()
        timing_changed = (
            updated.cron != state.schedule.cron
            or updated.timezone != state.schedule.timezone
            or (updated.enabled and not state.schedule.enabled)
        )
        # A resumed schedule starts from now: what passed while paused was not missed.
        next_run = first_run_at(updated, now, self.cron) if timing_changed else state.next_run_at
        replaced = self.store.replace(org_id, name, updated, next_run, now)
        if replaced is None:
            raise ScheduleNotFound(f"no schedule named {name!r}")
        return replaced

    def pause(self, org_id: str, name: str) -> ScheduleState:
        """Stop firing until resumed."""
        return self.update(org_id, name, {"enabled": False})

    def resume(self, org_id: str, name: str) -> ScheduleState:
        """Fire again, from the next tick after now."""
        return self.update(org_id, name, {"enabled": True})

    def remove(self, org_id: str, name: str) -> None:
        """Delete a run-time schedule (one declared in code comes back at the next start, so
        it is refused: pause it, or remove it from the code)."""
        state = self.get(org_id, name)
        if state.source == CODE:
            raise ScheduleDeclared(
                f"schedule {name!r} is declared in code and would come back at the next "
                "start: pause it, or remove its declaration"
            )
        if not self.store.remove(org_id, name):
            raise ScheduleNotFound(f"no schedule named {name!r}")

    def run_now(self, org_id: str, name: str) -> tuple[ScheduleState, Job]:
        """Enqueue the schedule's job at once, outside its ticks."""
        self.get(org_id, name)
        fired = self.store.fire_now(org_id, name, self._new_job, self.clock.now())
        if fired is None:
            raise ScheduleNotFound(f"no schedule named {name!r}")
        return fired

    # -- the scheduler ----------------------------------------------------------------------------
    def declare(self, schedules: Iterable[Schedule]) -> None:
        """Store (or refresh) the schedules modules declare in code. Raises
        :class:`ScheduleInvalid` for a bad declaration: a deployable must not start with one."""
        now = self.clock.now()
        declared = []
        for schedule in schedules:
            self._validate(schedule)
            declared.append((schedule, first_run_at(schedule, now, self.cron)))
        self.store.sync_declared(declared, now)

    def tick(self, limit: int = 100) -> list[Fired]:
        """Fire every due schedule whose type this registry knows (a scheduler leaves the
        others to one that does). With :attr:`quotas`, the due ticks of a tenant's schedule
        (run-time, of a public type) beyond its org's room under its queued quota are dropped,
        the oldest first: counted in :attr:`Fired.dropped`, never enqueued later."""
        now = self.clock.now()

        def plan(state: ScheduleState) -> Firing:
            firing = plan_firing(state.schedule, state.next_run_at, now, self.cron)
            return self._within_quota(state, firing)

        return self.store.fire_due(now, self.registry.names(), plan, self._new_job, limit)

    def _within_quota(self, state: ScheduleState, firing: Firing) -> Firing:
        schedule = state.schedule
        if (
            self.quotas is None
            or not firing.ticks
            or state.source == CODE
            or schedule.job_type not in self.registry
            or not self.registry.get(schedule.job_type).public
        ):
            return firing
        try:
            room = self.quotas.room(schedule.org_id, len(firing.ticks))
        except StoreUnavailable as error:
            # The count needs a connection of its own: when none can be had, the ticks fire
            # (a quota is a bound on a tenant, never a reason to stall every schedule).
            log.warning(
                "schedule %s of %s fired without its quota: %s",
                schedule.name,
                schedule.org_id,
                error,
            )
            return firing
        if room == len(firing.ticks):
            return firing
        kept = firing.ticks[len(firing.ticks) - room :] if room else ()
        return Firing(kept, firing.next_run_at, firing.dropped + len(firing.ticks) - room)

    # -- helpers ----------------------------------------------------------------------------------
    def _new_job(self, state: ScheduleState) -> NewJob:
        schedule = state.schedule
        return self.registry.new_job(schedule.org_id, schedule.job_type, dict(schedule.payload))

    def _validate(self, schedule: Schedule) -> None:
        validate_schedule(schedule, self.cron, set(self.registry.names()))
        try:
            self.registry.get(schedule.job_type).validate_payload(schedule.payload)
        except UnknownJobType as error:  # pragma: no cover - checked by validate_schedule
            raise ScheduleInvalid(str(error)) from None
        except PayloadInvalid as error:
            raise ScheduleInvalid(f"payload rejected by {schedule.job_type!r}: {error}") from None


def schedule_from_fields(org_id: str, fields: Mapping[str, Any]) -> Schedule:
    """A :class:`Schedule` of ``org_id`` from request fields (unknown ones refused)."""
    allowed = {f.name for f in dataclasses.fields(Schedule)} - {"org_id"}
    unknown = set(fields) - allowed
    if unknown:
        raise ScheduleInvalid(f"unknown field(s) {sorted(unknown)}: fields are {sorted(allowed)}")
    try:
        values = dict(fields)
        if "missed" in values:
            values["missed"] = MissedPolicy(values["missed"])
        return Schedule(org_id=org_id, **values)
    except ValueError as error:
        raise ScheduleInvalid(str(error)) from None
    except TypeError as error:
        raise ScheduleInvalid(f"missing or invalid field: {error}") from None
