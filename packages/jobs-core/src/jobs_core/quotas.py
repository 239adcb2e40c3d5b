"""Quotas per org: what one tenant may take of the system shared by every org (issue 23).

The rules live here, pure: the quotas an org has (:class:`Quotas`, the defaults merged with an
operator's :class:`QuotaOverride`), when one is exceeded (:class:`QuotaExceeded`, saying which,
its limit and when to try again), how short a schedule's interval is
(:func:`shortest_interval`), and which orgs are near a quota (:func:`near`). Where overrides
and counts are kept is the :class:`QuotaStore` port (in memory: :class:`InMemoryQuotaStore`;
PostgreSQL: ``jobs_postgres.quotas``); the use cases that apply the rules at enqueue time and
on schedules are :class:`jobs_core.quota_service.QuotaService` (docs/flow-control.md, "Quotas
per org"; decision 0033).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from jobs_core.domain import Status
from jobs_core.errors import JobsError

if TYPE_CHECKING:  # annotations only: the CLI's parser reads the defaults, not the schedules
    from jobs_core.schedules import Cron, Schedule


class Quota(StrEnum):
    """The name of a quota, as a problem document and the docs give it."""

    SCHEDULES = "schedules"
    SCHEDULE_INTERVAL = "schedule_interval"
    QUEUED_JOBS = "queued_jobs"
    ENQUEUE_RATE = "enqueue_rate"


@dataclass(frozen=True, slots=True)
class Quotas:
    """The quotas of one org; the defaults are what a small SaaS would pick.

    - ``max_schedules``: run-time schedules the org may hold (those declared in code by a module
      are the operator's and do not count);
    - ``min_schedule_interval_s``: the shortest interval between two ticks of a tenant's
      schedule (60: no second-level cron; operators and internal types are exempt);
    - ``max_queued``: queued jobs the org may hold (due or not); an enqueue over it is refused;
    - ``enqueue_rate`` / ``enqueue_burst``: jobs per second the org may enqueue over HTTP,
      sustained, and at once (a token bucket per API process).
    """

    max_schedules: int = 100
    min_schedule_interval_s: int = 60
    max_queued: int = 10_000
    enqueue_rate: float = 50.0
    enqueue_burst: int = 500

    def __post_init__(self) -> None:
        for name in ("max_schedules", "max_queued"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.min_schedule_interval_s < 1:
            raise ValueError("min_schedule_interval_s must be >= 1 (second)")
        if not self.enqueue_rate > 0 or not math.isfinite(self.enqueue_rate):
            raise ValueError("enqueue_rate must be a positive number of jobs per second")
        if self.enqueue_burst < 1:
            raise ValueError("enqueue_burst must be >= 1 job")

    def merged(self, override: QuotaOverride | None) -> Quotas:
        """These quotas with the fields ``override`` sets (None: this default)."""
        if override is None:
            return self
        changes = {name: value for name, value in override.limits().items() if value is not None}
        return dataclasses.replace(self, **changes) if changes else self

    def to_dict(self) -> dict[str, Any]:
        """The quotas as JSON."""
        return {name: getattr(self, name) for name in LIMITS}


LIMITS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Quotas))
"""The fields of :class:`Quotas` an override may set."""

DEFAULT_QUOTAS = Quotas()

ENVIRONMENT = {name: f"JOBS_QUOTA_{name.upper()}" for name in LIMITS}
"""The setting of each default (``JOBS_QUOTA_MAX_QUEUED``...); ``JOBS_QUOTAS`` switches them."""

_OFF = {"0", "false", "no", "off"}


def quotas_from_environ(environ: Mapping[str, str]) -> tuple[bool, Quotas]:
    """Whether quotas are enforced (``JOBS_QUOTAS``, on unless ``0``) and the defaults the
    ``JOBS_QUOTA_*`` variables of ``environ`` give (unset: :data:`DEFAULT_QUOTAS`'); ValueError
    naming the variable for a bad value. The API reads the same variables as its settings;
    the worker's scheduler and the CLI read them here."""
    values: dict[str, Any] = {}
    for name, variable in ENVIRONMENT.items():
        raw = environ.get(variable, "").strip()
        if not raw:
            continue
        try:
            values[name] = float(raw) if name == "enqueue_rate" else int(raw)
        except ValueError:
            raise ValueError(f"{variable}={raw!r} is not a number") from None
    try:
        quotas = Quotas(**values)
    except ValueError as error:
        raise ValueError(f"JOBS_QUOTA_*: {error}") from None
    return environ.get("JOBS_QUOTAS", "1").strip().lower() not in _OFF, quotas


@dataclass(frozen=True, slots=True)
class QuotaOverride:
    """An operator's change to one org's quotas; a field left None keeps the default."""

    org_id: str
    max_schedules: int | None = None
    min_schedule_interval_s: int | None = None
    max_queued: int | None = None
    enqueue_rate: float | None = None
    enqueue_burst: int | None = None
    updated_at: datetime | None = None
    updated_by: str = ""

    def __post_init__(self) -> None:
        if not self.org_id or self.org_id != self.org_id.strip():
            raise ValueError("org_id must be a non-empty org id without surrounding spaces")
        # Validated as a whole: the values must make valid quotas over any default.
        DEFAULT_QUOTAS.merged(self)

    def limits(self) -> dict[str, Any]:
        """The limit fields, None where the default applies."""
        return {name: getattr(self, name) for name in LIMITS}

    @property
    def empty(self) -> bool:
        """True when it changes nothing."""
        return all(value is None for value in self.limits().values())


def override_from(
    org_id: str, fields: Mapping[str, Any], base: QuotaOverride | None = None
) -> QuotaOverride:
    """``base`` (or no override) with ``fields`` set (a None value: back to the default);
    ValueError naming the field for an unknown field or an invalid value."""
    unknown = set(fields) - set(LIMITS)
    if unknown:
        raise ValueError(f"unknown quota(s) {sorted(unknown)}: quotas are {list(LIMITS)}")
    for name, value in fields.items():
        integer = name != "enqueue_rate"
        kinds: tuple[type, ...] = (int,) if integer else (int, float)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise ValueError(f"{name} must be {'an integer' if integer else 'a number'} or null")
    current = base.limits() if base is not None else {}
    return QuotaOverride(org_id, **{**current, **fields})


class QuotaExceeded(JobsError):
    """The org is over one of its quotas: the message says which, what it is, and what to do.

    ``quota`` names it; ``limit`` and ``used`` are its value and the org's use; ``retry_after_s``
    is when trying again may succeed (None: waiting alone does not help)."""

    def __init__(
        self,
        quota: Quota,
        message: str,
        *,
        limit: float,
        used: float | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.quota = quota
        self.limit = limit
        self.used = used
        self.retry_after_s = retry_after_s


def queued_exceeded(org_id: str, used: int, quotas: Quotas, retry_after_s: int) -> QuotaExceeded:
    """The refusal of an enqueue by an org holding ``used`` queued jobs."""
    return QuotaExceeded(
        Quota.QUEUED_JOBS,
        f"org {org_id!r} holds {used:,} queued jobs, its quota of queued jobs is "
        f"{quotas.max_queued:,}: wait for some to start, cancel some, or ask an operator "
        "to raise the quota",
        limit=quotas.max_queued,
        used=used,
        retry_after_s=retry_after_s,
    )


def rate_exceeded(org_id: str, quotas: Quotas, retry_after_s: int) -> QuotaExceeded:
    """The refusal of an enqueue faster than the org's enqueue rate."""
    return QuotaExceeded(
        Quota.ENQUEUE_RATE,
        f"org {org_id!r} enqueues faster than its quota of {quotas.enqueue_rate:g} jobs per "
        f"second (bursts of {quotas.enqueue_burst:,}): slow down, retry after "
        f"{retry_after_s} s, or send fewer, larger jobs",
        limit=quotas.enqueue_rate,
        retry_after_s=retry_after_s,
    )


def schedules_exceeded(org_id: str, used: int, limit: int) -> QuotaExceeded:
    """The refusal of a new schedule by an org that holds ``used`` of its ``limit``."""
    return QuotaExceeded(
        Quota.SCHEDULES,
        f"org {org_id!r} holds {used:,} schedules, its quota is {limit:,}: delete one, or ask "
        "an operator to raise the quota",
        limit=limit,
        used=used,
    )


# ---- the shortest interval of a schedule ----------------------------------------------------

TICKS_CHECKED = 500
"""Ticks of a cron expression walked to find its shortest interval (from now on)."""


def shortest_interval(
    expression: str, timezone: str, cron: Cron, now: datetime, *, below: float = 0
) -> float:
    """The shortest time in seconds between two consecutive ticks of ``expression`` among its
    next :data:`TICKS_CHECKED` ticks after ``now`` (stops at the first gap under ``below``).

    ``* * * * * *`` gives 1; ``*/5 * * * *`` 300; ``0 4 * * *`` 86,400 (or 82,800 across a
    daylight-saving change of its zone, in local time)."""
    shortest = math.inf
    previous = cron.next_after(expression, timezone, now)
    for _ in range(TICKS_CHECKED - 1):
        tick = cron.next_after(expression, timezone, previous)
        shortest = min(shortest, (tick - previous).total_seconds())
        if shortest < below:
            break
        previous = tick
    return shortest


def check_interval(schedule: Schedule, cron: Cron, now: datetime, quotas: Quotas) -> None:
    """:class:`QuotaExceeded` (``schedule_interval``) when ``schedule`` ticks more often than
    its org's ``min_schedule_interval_s``."""
    minimum = quotas.min_schedule_interval_s
    org_id, expression = schedule.org_id, schedule.cron
    gap = shortest_interval(expression, schedule.timezone, cron, now, below=minimum)
    if gap < minimum:
        raise QuotaExceeded(
            Quota.SCHEDULE_INTERVAL,
            f"cron {expression!r} fires every {gap:g} s at times; org {org_id!r} may schedule "
            f"no more often than every {minimum:,} s: use a coarser expression (5 fields: "
            "minute hour day month weekday), or ask an operator",
            limit=minimum,
            used=gap,
        )


# ---- usage ----------------------------------------------------------------------------------

NEAR_FRACTION = 0.8
"""An org is *near* a quota from this share of it on (``jobs doctor``, the panel)."""


@dataclass(frozen=True, slots=True)
class OrgUsage:
    """What an org uses of its counted quotas."""

    org_id: str
    queued: int = 0
    schedules: int = 0


@dataclass(frozen=True, slots=True)
class NearQuota:
    """An org at ``fraction`` of a quota (``used`` of ``limit``)."""

    org_id: str
    quota: Quota
    used: int
    limit: int

    @property
    def fraction(self) -> float:
        """``used / limit`` (1 for a quota of 0)."""
        return self.used / self.limit if self.limit else 1.0

    def to_dict(self) -> dict[str, Any]:
        """As JSON."""
        return {
            "org": self.org_id,
            "quota": self.quota.value,
            "used": self.used,
            "limit": self.limit,
            "fraction": round(self.fraction, 3),
        }


def near(usage: OrgUsage, quotas: Quotas, fraction: float = NEAR_FRACTION) -> list[NearQuota]:
    """The counted quotas of which ``usage`` reaches ``fraction`` (or more)."""
    found = []
    for quota, used, limit in (
        (Quota.QUEUED_JOBS, usage.queued, quotas.max_queued),
        (Quota.SCHEDULES, usage.schedules, quotas.max_schedules),
    ):
        if used and used >= fraction * limit:
            found.append(NearQuota(usage.org_id, quota, used, limit))
    return found


# ---- the port and its in-memory adapter -----------------------------------------------------


class QuotaStore(Protocol):
    """Where the operators' overrides are kept and the org's counted uses are read."""

    def get_override(self, org_id: str) -> QuotaOverride | None:
        """The org's override, if an operator set one."""
        ...

    def overrides(self) -> list[QuotaOverride]:
        """Every override, by org."""
        ...

    def set_override(self, override: QuotaOverride, now: datetime) -> QuotaOverride:
        """Store the org's override (replacing the one it had), stamped ``now``; one that
        changes nothing is removed instead."""
        ...

    def clear_override(self, org_id: str) -> bool:
        """Remove the org's override; False if it had none."""
        ...

    def queued_count(self, org_id: str, cap: int) -> int:
        """The org's queued jobs, counted up to ``cap`` (the answer is at most ``cap``): a
        count that stops at the quota costs no more than the quota, however deep the queue."""
        ...

    def usage(self, org_ids: Sequence[str] | None = None) -> list[OrgUsage]:
        """The queued jobs and run-time schedules of the orgs (every org that has any, with
        None), by org."""
        ...


class InMemoryQuotaStore:
    """The quota store beside an in-memory job store (whose jobs it counts). The in-memory
    deployable has no schedules: every org holds none."""

    def __init__(self, jobs: Any) -> None:
        self._jobs = jobs  # an InMemoryJobStore (not imported: memory.py is the job store's)
        self._overrides: dict[str, QuotaOverride] = {}

    def get_override(self, org_id: str) -> QuotaOverride | None:
        """The org's override, if any."""
        return self._overrides.get(org_id)

    def overrides(self) -> list[QuotaOverride]:
        """Every override, by org."""
        return [self._overrides[org] for org in sorted(self._overrides)]

    def set_override(self, override: QuotaOverride, now: datetime) -> QuotaOverride:
        """Keep the override, stamped ``now`` (an empty one removes the org's)."""
        if override.empty:
            self._overrides.pop(override.org_id, None)
            return dataclasses.replace(override, updated_at=now)
        stored = dataclasses.replace(override, updated_at=now)
        self._overrides[override.org_id] = stored
        return stored

    def clear_override(self, org_id: str) -> bool:
        """Forget the org's override."""
        return self._overrides.pop(org_id, None) is not None

    def queued_count(self, org_id: str, cap: int) -> int:
        """The org's queued jobs, up to ``cap``."""
        return min(int(self._jobs.stats(org_id)[Status.QUEUED]), cap)

    def usage(self, org_ids: Sequence[str] | None = None) -> list[OrgUsage]:
        """Queued jobs per org (no schedules in memory)."""
        counts: Counter[str] = Counter(
            job.org_id for job in self._jobs.jobs if job.status is Status.QUEUED
        )
        orgs = sorted(counts) if org_ids is None else sorted(set(org_ids))
        return [OrgUsage(org, counts.get(org, 0), 0) for org in orgs]
