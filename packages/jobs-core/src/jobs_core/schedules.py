"""Schedules: a job enqueued at each tick of a cron expression, in a time zone.

The rules live here, as pure functions of ``(schedule, next_run_at, now, cron)``; an adapter
stores the schedules and applies :func:`plan_firing` under a row lock, in the transaction that
enqueues the jobs (docs/schedules.md, decision 0018).

Cron expressions are read by an adapter of the :class:`Cron` port (jobs-core imports nothing
outside the standard library); ``jobs_postgres.cron.CronsimCron`` is the shipped one.
"""

from __future__ import annotations

import re
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from jobs_core.errors import JobsError

SCHEDULE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.:-]{0,99}$")

MISFIRE_GRACE = timedelta(seconds=60)
"""A tick that is due for longer than this when a scheduler sees it was *missed* (nothing ran
the scheduler at that time); younger due ticks are merely late and always fire."""

MAX_CATCHUP = 100
"""The most missed ticks the ``each`` policy may fire at once (a schedule asks for fewer)."""

ENUMERATION_LIMIT = 10_000
"""Ticks walked at most to find the due ones; beyond, older missed ticks are counted as a lump
(a per-second schedule stopped for a week must not walk 600,000 ticks)."""


class MissedPolicy(StrEnum):
    """What to do with ticks missed while no scheduler ran.

    - ``skip``: missed ticks are dropped; only on-time (late by less than
      :data:`MISFIRE_GRACE`) ticks fire;
    - ``once``: all missed ticks together fire one job (the latest missed tick), unless an
      on-time tick fires anyway;
    - ``each``: each missed tick fires its own job, the most recent ``max_catchup`` of them.
    """

    SKIP = "skip"
    ONCE = "once"
    EACH = "each"


TEXT_LIMITS: dict[str, int] = {
    "name": 100,
    "job_type": 100,
    "cron": 200,
    "timezone": 64,
    "description": 2000,
}
"""The most characters of each text field of a schedule (docs/schedules.md): checked before
anything else reads the value, so no message ever quotes a longer one."""


class ScheduleInvalid(JobsError, ValueError):
    """The schedule is invalid; the message says which field and why (``field`` names it when
    one field is at fault)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ScheduleNotFound(JobsError):
    """No schedule of that name in this organization."""


class ScheduleExists(JobsError):
    """A schedule of that name already exists in this organization: pick another name, or
    change the existing one."""


class ScheduleDeclared(JobsError):
    """The schedule is declared in code: only pause and resume apply at run time."""


class Cron(Protocol):
    """Reads cron expressions (an adapter wraps a cron library)."""

    def check(self, expression: str, timezone: str) -> None:
        """Raise :class:`ScheduleInvalid` (saying what is wrong) for a bad expression or an
        unknown time zone."""
        ...

    def next_after(self, expression: str, timezone: str, after: datetime) -> datetime:
        """The first tick strictly after ``after`` (aware), as an aware UTC instant."""
        ...


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as a module declares it in code, or an operator creates it at run time.

    A plain value: a module's registry or declaration object may hold a list of them.
    """

    name: str
    org_id: str
    job_type: str
    cron: str
    timezone: str = "UTC"
    payload: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    missed: MissedPolicy = MissedPolicy.ONCE
    max_catchup: int = 10
    description: str = ""

    def __post_init__(self) -> None:
        for name, limit in TEXT_LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, str) and len(value) > limit:
                raise ScheduleInvalid(
                    f"{name} is {len(value)} characters long; at most {limit} are allowed",
                    field=name,
                )
        if not SCHEDULE_NAME.match(self.name):
            raise ScheduleInvalid(
                f"schedule name {self.name!r} must match {SCHEDULE_NAME.pattern} "
                "(lowercase letters, digits, _ . : -; at most 100 characters)"
            )
        if not self.org_id or self.org_id != self.org_id.strip():
            raise ScheduleInvalid("org_id must be a non-empty org id without surrounding spaces")
        if not self.job_type:
            raise ScheduleInvalid("job_type must name a registered job type")
        if not self.cron.strip():
            raise ScheduleInvalid("cron must be a cron expression, e.g. '0 4 * * *'")
        if not isinstance(self.payload, Mapping):
            raise ScheduleInvalid("payload must be a JSON object")
        if not 1 <= self.max_catchup <= MAX_CATCHUP:
            raise ScheduleInvalid(f"max_catchup must be between 1 and {MAX_CATCHUP}")
        object.__setattr__(self, "missed", MissedPolicy(self.missed))


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A stored schedule and where it stands: its next tick and its last run."""

    schedule: Schedule
    id: uuid.UUID
    source: str
    """``code`` (declared by a module, rewritten at each scheduler start) or ``api``."""
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Firing:
    """What a scheduler does with one due schedule: enqueue a job for each of ``ticks`` (oldest
    first), then move ``next_run_at`` forward; ``dropped`` missed ticks fire nothing."""

    ticks: tuple[datetime, ...]
    next_run_at: datetime
    dropped: int = 0


def first_run_at(schedule: Schedule, now: datetime, cron: Cron) -> datetime:
    """The first tick of a new (or re-enabled, or changed) schedule: strictly after ``now``."""
    return cron.next_after(schedule.cron, schedule.timezone, now)


def plan_firing(
    schedule: Schedule,
    next_run_at: datetime,
    now: datetime,
    cron: Cron,
    grace: timedelta = MISFIRE_GRACE,
) -> Firing:
    """The jobs due at ``now`` for ``schedule`` whose next tick was ``next_run_at``.

    Ticks due for less than ``grace`` are on time and always fire, each with its own job (a
    scheduler a few seconds late never loses a tick). Older ones were missed and follow the
    schedule's :class:`MissedPolicy`. The new ``next_run_at`` is the first tick after ``now``.
    """
    if next_run_at > now:
        return Firing((), next_run_at)
    on_time_from = now - grace
    missed: deque[datetime] = deque(maxlen=max(schedule.max_catchup, 1))
    missed_count = 0
    on_time: list[datetime] = []
    tick = next_run_at
    walked = 0
    while tick <= now:
        if tick >= on_time_from:
            on_time.append(tick)
        else:
            missed.append(tick)
            missed_count += 1
        walked += 1
        if walked >= ENUMERATION_LIMIT and tick < on_time_from:
            # Lump the remaining missed ticks: jump to the last one before the on-time window.
            missed_count += 1  # at least one more was skipped over
            tick = cron.next_after(schedule.cron, schedule.timezone, on_time_from - _EPSILON)
            continue
        tick = cron.next_after(schedule.cron, schedule.timezone, tick)
    following = tick
    if schedule.missed is MissedPolicy.SKIP or not missed:
        fired: list[datetime] = on_time
    elif schedule.missed is MissedPolicy.ONCE:
        fired = on_time if on_time else [missed[-1]]
    else:
        fired = [*missed, *on_time]
    return Firing(tuple(fired), following, dropped=missed_count + len(on_time) - len(fired))


_EPSILON = timedelta(microseconds=1)


def validate_schedule(schedule: Schedule, cron: Cron, known_types: set[str] | None) -> None:
    """Every check a new or changed schedule must pass; :class:`ScheduleInvalid` otherwise."""
    cron.check(schedule.cron, schedule.timezone)
    if known_types is not None and schedule.job_type not in known_types:
        raise ScheduleInvalid(
            f"unknown job type {schedule.job_type!r}: a schedule enqueues a registered type "
            f"({', '.join(sorted(known_types)) or 'none registered'})"
        )
