"""The use cases of quotas per org: admit an enqueue, check a tenant's schedule, show an org's
quotas and use, and the operators' overrides (the rules: :mod:`jobs_core.quotas`).

An enqueue must stay as cheap as it was (decision 0033): :meth:`QuotaService.admit` reads
nothing from the store on most calls. Each process keeps, per org, the quotas it last read and
the queued count it last took (a count that stops at the quota, on an index: cheap), and adds
the jobs it admitted since the count began; both are read again once they are ``refresh_s``
old. So an org may pass its queued quota by what it enqueues through *other* processes within
``refresh_s`` and by its enqueues in flight in this one when a count reads (at most its
concurrent requests), and may be refused for up to ``refresh_s`` after its queue went down
(``Retry-After`` says when to try again). The enqueue rate is a token bucket per org in each
process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobs_core.clock import SystemClock
from jobs_core.ports import Clock
from jobs_core.quotas import (
    DEFAULT_QUOTAS,
    NearQuota,
    OrgUsage,
    QuotaOverride,
    Quotas,
    QuotaStore,
    check_interval,
    near,
    override_from,
    queued_exceeded,
    rate_exceeded,
)
from jobs_core.schedules import Cron, Schedule

REFRESH_S = 1.0
"""How long a process trusts the quotas and the queued count it read of an org."""

CLOCK_STEP = timedelta(seconds=1)
"""A clock read this much before the bucket's last fill (at least) is a clock stepped back, not
a thread that read it an instant before another."""


@dataclass(slots=True)
class _Org:
    """What this process knows of one org."""

    quotas: Quotas
    read_at: datetime
    counted: int | None = None  # queued jobs at the last count (None: not counted yet)
    counted_at: datetime | None = None
    admitted: int = 0  # jobs this process admitted for the org, ever
    before_count: int = 0  # ``admitted`` when the last count began

    @property
    def used(self) -> int:
        """Queued jobs as this process sees them: the count, and what it admitted since the
        count began (a job admitted after that and inserted before the count read is counted
        twice: an over-estimate, never an under-estimate, but for the enqueues in flight)."""
        return (self.counted or 0) + self.admitted - self.before_count

    tokens: float = 0.0  # the enqueue bucket
    filled_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class OrgQuotas:
    """An org's quotas, what it uses of them, and the ones it is near."""

    org_id: str
    quotas: Quotas
    usage: OrgUsage
    near: list[NearQuota]
    overridden: bool

    def to_dict(self) -> dict[str, Any]:
        """As JSON (``GET /quotas``, ``jobs quotas --json``)."""
        return {
            "org": self.org_id,
            "quotas": self.quotas.to_dict(),
            "overridden": self.overridden,
            "usage": {"queued_jobs": self.usage.queued, "schedules": self.usage.schedules},
            "near": [n.to_dict() for n in self.near],
        }


class QuotaService:
    """Quotas per org over one store, with ``defaults`` for the orgs no operator changed.

    ``enabled=False`` admits everything (the quotas are still shown)."""

    def __init__(
        self,
        store: QuotaStore,
        defaults: Quotas = DEFAULT_QUOTAS,
        clock: Clock | None = None,
        *,
        enabled: bool = True,
        refresh_s: float = REFRESH_S,
    ) -> None:
        if refresh_s < 0:
            raise ValueError("refresh_s must be >= 0")
        self.store = store
        self.defaults = defaults
        self.clock: Clock = clock or SystemClock()
        self.enabled = enabled
        self._refresh = timedelta(seconds=refresh_s)
        self._orgs: dict[str, _Org] = {}
        self._lock = threading.Lock()

    # -- the enqueue ----------------------------------------------------------------------------
    def admit(self, org_id: str, count: int = 1) -> None:
        """Admit ``count`` jobs the org enqueues now, or raise
        :class:`~jobs_core.quotas.QuotaExceeded` (``enqueue_rate``, then ``queued_jobs``) with
        the seconds after which trying again may succeed."""
        if not self.enabled:
            return
        now = self.clock.now()
        known = self._counted(org_id, now)
        quotas = known.quotas
        with self._lock:
            self._fill(known, now)
            if known.tokens < count:
                wait = (count - known.tokens) / quotas.enqueue_rate
                raise rate_exceeded(org_id, quotas, max(1, math.ceil(wait)))
            used = known.used
            if used + count > quotas.max_queued:
                raise queued_exceeded(org_id, used, quotas, self._retry_after())
            known.tokens -= count
            known.admitted += count

    def room(self, org_id: str, wanted: int) -> int:
        """How many of ``wanted`` jobs the org may add to its queue now (0 at its queued
        quota), counted as admitted: what the scheduler fires of a tenant's due ticks. No
        rate applies (a schedule's ticks are bounded by its interval and the org's count)."""
        if not self.enabled:
            return wanted
        known = self._counted(org_id, self.clock.now())
        with self._lock:
            free = known.quotas.max_queued - known.used
            granted = max(0, min(wanted, free))
            known.admitted += granted
            return granted

    def _counted(self, org_id: str, now: datetime) -> _Org:
        """The org as this process knows it, its queued jobs counted again when that count
        is ``refresh_s`` old (or the clock went back by more than that)."""
        known = self._known(org_id, now)
        taken = known.counted_at
        if taken is None or abs(now - taken) >= self._refresh:
            with self._lock:
                before = known.admitted
            counted = self.store.queued_count(org_id, known.quotas.max_queued)
            with self._lock:
                # Concurrent counts: the one that began last wins (it has seen the most).
                if before >= known.before_count:
                    known.counted, known.counted_at, known.before_count = counted, now, before
        return known

    def _fill(self, known: _Org, now: datetime) -> None:
        """Refill the org's bucket for the time since it was last filled. A thread that read
        the clock an instant before another filled it adds nothing (it never refills the bucket
        whole); a clock stepped back by more than ``refresh_s`` starts the bucket afresh."""
        quotas = known.quotas
        filled = known.filled_at
        if filled is None or now < filled - max(self._refresh, CLOCK_STEP):
            known.tokens, known.filled_at = float(quotas.enqueue_burst), now
            return
        elapsed = max(0.0, (now - filled).total_seconds())
        known.tokens = min(
            float(quotas.enqueue_burst), known.tokens + elapsed * quotas.enqueue_rate
        )
        known.filled_at = max(filled, now)

    def _retry_after(self) -> int:
        return max(1, math.ceil(self._refresh.total_seconds()))

    def _known(self, org_id: str, now: datetime) -> _Org:
        """The org as this process knows it, its quotas read again when ``refresh_s`` old."""
        known = self._orgs.get(org_id)
        if known is not None and abs(now - known.read_at) < self._refresh:
            return known
        quotas = self.defaults.merged(self.store.get_override(org_id))
        with self._lock:
            known = self._orgs.get(org_id)
            if known is None:
                known = self._orgs[org_id] = _Org(quotas, now)
            else:
                known.quotas, known.read_at = quotas, now
            return known

    # -- schedules ------------------------------------------------------------------------------
    def quotas_of(self, org_id: str) -> Quotas:
        """The org's quotas now (its override over the defaults), read from the store."""
        return self.defaults.merged(self.store.get_override(org_id))

    def check_schedule(self, schedule: Schedule, cron: Cron, *, exempt: bool = False) -> int | None:
        """The checks of a tenant's new or changed schedule: :class:`QuotaExceeded`
        (``schedule_interval``) when it ticks more often than the org may; the org's
        ``max_schedules``, for the store to apply as it inserts (None: no limit, quotas off).
        ``exempt``: an operator's, or of an internal type (no minimum interval)."""
        if not self.enabled:
            return None
        quotas = self.quotas_of(schedule.org_id)
        if not exempt:
            check_interval(schedule, cron, self.clock.now(), quotas)
        return quotas.max_schedules

    # -- reads and the operators' overrides -----------------------------------------------------
    def of(self, org_id: str) -> OrgQuotas:
        """The org's quotas, its use of them and the ones it is near."""
        override = self.store.get_override(org_id)
        quotas = self.defaults.merged(override)
        [usage] = self.store.usage([org_id])
        return OrgQuotas(org_id, quotas, usage, near(usage, quotas), override is not None)

    def report(self, org_ids: Sequence[str] | None = None) -> list[OrgQuotas]:
        """:meth:`of` for every org that has queued jobs, schedules or an override (or those
        given), by org: what ``jobs doctor`` and ``jobs quotas`` show."""
        overrides = {o.org_id: o for o in self.store.overrides()}
        usage = {u.org_id: u for u in self.store.usage(org_ids)}
        orgs = sorted(set(usage) | set(overrides)) if org_ids is None else sorted(set(org_ids))
        report = []
        for org in orgs:
            quotas = self.defaults.merged(overrides.get(org))
            used = usage.get(org, OrgUsage(org))
            report.append(OrgQuotas(org, quotas, used, near(used, quotas), org in overrides))
        return report

    def set_override(self, org_id: str, fields: Mapping[str, Any], by: str) -> QuotaOverride:
        """Change some of the org's quotas (a None value: back to the default); ValueError
        naming the field for a bad one. Other processes see it within ``refresh_s``."""
        override = override_from(org_id, fields, self.store.get_override(org_id))
        stored = self.store.set_override(
            QuotaOverride(**{**_fields_of(override), "updated_by": by}), self.clock.now()
        )
        self._forget(org_id)
        return stored

    def clear_override(self, org_id: str) -> bool:
        """Give the org the default quotas again; False if it had none."""
        cleared = self.store.clear_override(org_id)
        self._forget(org_id)
        return cleared

    def _forget(self, org_id: str) -> None:
        with self._lock:
            self._orgs.pop(org_id, None)


def _fields_of(override: QuotaOverride) -> dict[str, Any]:
    return {"org_id": override.org_id, **override.limits()}
