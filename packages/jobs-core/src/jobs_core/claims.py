"""One claim, as data: the plan both stores run (decision 0027).

A claim takes up to ``limit`` due jobs. What it selects is composed from independent parts:

- the **types** it may take (None: any);
- the **concurrency limits** of those types (:class:`~jobs_core.flow.FlowLimit`): a job whose
  key or type is full is passed over, and the candidates are admitted in order while they fit
  (:func:`~jobs_core.flow.admit`);
- the **rate limits** of those types (``FlowLimit.rate``, :mod:`jobs_core.rates`): a job whose
  key has had N starts in the window ending at ``now`` is passed over like a full key, and the
  admission counts the starts as it counts running jobs;
- **fairness** between orgs (a :class:`~jobs_core.flow.FairTurn`): each org's head before the
  rest of its priority, orgs in turn (:func:`~jobs_core.flow.fair_order`).

Any combination holds: fairness is applied under limits and with a type filter alike. There is
one claim order (:func:`jobs_core.domain.claim_order`: priority, then age), which fairness
re-ranks within a priority. :func:`choose` is the rule, step by step, as the in-memory store runs
it; the PostgreSQL store turns the same plan into SQL (``jobs_postgres.claims``) step for step:

1. the due jobs of the plan's types (``status = queued``, ``run_at <= now``), none of a paused
   type (:mod:`jobs_core.pauses`: the store's pauses, read by the claim itself);
2. in claim order, or in fair order with a turn (an org's head: its first due job);
3. under limits, without those whose key or type is already full (the running jobs counted,
   and the recorded starts of the rate-limited keys in their windows);
4. the first ``limit`` of them are the candidates;
5. under limits, the candidates admitted in that order while they fit; else all of them. The
   store records the starts of the rate-limited keys it admitted (:func:`flow.record`,
   :func:`jobs_core.rates.recorded`) in the same write as the claim.

``limit`` is how many jobs one statement claims: a worker asks for its free slots and, for
fast handlers, a few more it holds ready (prefetch); the plan does not care which.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobs_core import domain
from jobs_core.domain import Job, Status
from jobs_core.flow import ClaimLimits, FairTurn, RecentStarts, admit, fair_order, full

FAIR_CLAIM_DEFAULT = True
"""Whether a claimer claims in fair order between orgs when nobody says (``JobService`` and the
worker's ``JOBS_FAIR_CLAIM``): on, so one org's backlog never starves another's (issue 23);
``JOBS_FAIR_CLAIM=0`` gives the plain first-in, first-out claim."""


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """What one claim selects (see the module's steps); built by :meth:`of`.

    ``types`` None: any type; an empty tuple claims nothing. ``limits`` None: no limits (an
    empty mapping is normalised to None). ``turn`` None: plain claim order.
    """

    limit: int
    now: datetime
    types: tuple[str, ...] | None = None
    limits: ClaimLimits | None = None
    turn: FairTurn | None = None

    @classmethod
    def of(
        cls,
        limit: int,
        now: datetime,
        types: Sequence[str] | None = None,
        *,
        limits: ClaimLimits | None = None,
        turn: FairTurn | None = None,
    ) -> ClaimPlan:
        """The plan of ``JobStore.claim``'s arguments."""
        return cls(
            limit,
            now,
            None if types is None else tuple(types),
            dict(limits) if limits else None,
            turn,
        )

    @property
    def empty(self) -> bool:
        """True when the plan can claim nothing whatever the queue holds."""
        return self.limit <= 0 or (self.types is not None and not self.types)

    @property
    def fair(self) -> bool:
        """Claimed in fair order between orgs."""
        return self.turn is not None

    @property
    def limited(self) -> bool:
        """Admitted under limits (concurrency limits, rate limits or both)."""
        return bool(self.limits)

    @property
    def rated(self) -> bool:
        """Some type of the plan has a rate limit: the claim reads and writes recorded starts
        (a plan without one never touches them)."""
        return bool(self.limits) and any(
            limit.rate is not None for limit in (self.limits or {}).values()
        )


def choose(
    plan: ClaimPlan,
    queued: Iterable[Job],
    running: Iterable[Job],
    paused: Collection[str] = (),
    starts: RecentStarts | None = None,
) -> list[Job]:
    """The jobs ``plan`` claims, in claim order of the plan, among ``queued`` (the queued jobs
    it may see) with ``running`` running, the types ``paused`` and the ``starts`` recorded for
    the rate-limited keys: the rule of every store (steps 1-5 above)."""
    if plan.empty:
        return []
    wanted = None if plan.types is None else frozenset(plan.types)
    due = [
        job
        for job in queued
        if job.status is Status.QUEUED
        and job.run_at <= plan.now
        and (wanted is None or job.type in wanted)
        and job.type not in paused
    ]
    due.sort(key=domain.claim_order)
    if plan.turn is not None:
        due = fair_order(due, plan.turn)
    busy = list(running) if plan.limits else []
    if plan.limits:
        closed = full(busy, plan.limits, starts=starts, now=plan.now)
        due = [job for job in due if not closed(job)]
    candidates = due[: plan.limit]
    if plan.limits:
        return admit(candidates, busy, plan.limits, plan.limit, starts=starts, now=plan.now)
    return candidates
