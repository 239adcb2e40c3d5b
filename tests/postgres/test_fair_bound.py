"""The fairness bound, on PostgreSQL, behind a real backlog (docs/flow-control.md, "The bound"):
org B's first job is claimed within ceil(orgs / claim size) claims of one claimer while org A
holds 100,000 queued jobs older than it — with 2, 10 and 100 orgs with due work, with the
concurrency limits on and off, with claims of 1 and of 10. Counted in claims, never timed.

The plain claim (``fair_claim=False``) is the control: it takes B's job only after A's backlog,
so the test fails if the fair order is lost."""

from __future__ import annotations

import math

import pytest
from jobs_core import FakeClock, JobContext, JobService, JobType, KeyScope, Registry
from jobs_core.flow import scoped_key
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BACKLOG = 100_000
SITES = 1_000  # org A's backlog spreads over this many keys (limits on: 2 running per key)

# org A's backlog, older than everything else, in one statement (the store's enqueue would take
# seconds per case); its concurrency keys are the ones the registry derives (``:keys``)
BACKLOG_SQL = text(
    """
INSERT INTO jobs (id, org_id, type, payload, created_at, run_at, concurrency_key)
SELECT gen_random_uuid(), 'org-a', 'work', jsonb_build_object('site', 's' || (i % :sites)),
       CAST(:now AS timestamptz) - make_interval(secs => :backlog - i + 3600),
       CAST(:now AS timestamptz) - make_interval(secs => :backlog - i + 3600),
       (CAST(:keys AS text[]))[1 + i % :sites]
FROM generate_series(0, :backlog - 1) AS i
"""
)
RESET_SQL = text(
    "UPDATE jobs SET status = 'queued', lease = NULL, attempts = 0, started_at = NULL "
    "WHERE status = 'running'"
)


def _ok(ctx: JobContext) -> None:
    return None


def _registry(limits: bool) -> Registry:
    registry = Registry("fair-bound")
    if limits:
        registry.register(
            JobType("work", _ok, concurrency_key="site", concurrency_limit=2, max_running=50_000)
        )
    else:
        registry.register(JobType("work", _ok))
    return registry


def _claims_until(service: JobService, batch: int, wanted: object, most: int) -> int | None:
    """How many claims of ``batch`` jobs it takes ``service`` to claim ``wanted`` (None: not
    within ``most``). The claimed jobs stay running, as on a worker whose slots are busy."""
    for count in range(1, most + 1):
        if any(job.id == wanted for job in service.claim(batch)):
            return count
    return None


@pytest.mark.parametrize("limits", [False, True], ids=["no-limits", "limits"])
@pytest.mark.parametrize("orgs", [2, 10, 100])
def test_org_b_starts_within_its_bound_behind_org_a_backlog(
    pg_store: PostgresJobStore, pg_engine: Engine, orgs: int, limits: bool
) -> None:
    clock = FakeClock()
    registry = _registry(limits)
    keys = [scoped_key("org-a", f"s{i}", KeyScope.ORG) for i in range(SITES)]
    with pg_engine.begin() as conn:
        conn.execute(
            BACKLOG_SQL, {"now": clock.now(), "backlog": BACKLOG, "sites": SITES, "keys": keys}
        )
        conn.execute(text("ANALYZE jobs"))
    setup = JobService(pg_store, registry, clock)
    for n in range(orgs - 2):  # the other orgs, 3 due jobs each, older than B's
        setup.enqueue_many(f"org-m{n:03d}", "work", [{"site": f"s{i}"} for i in range(3)])
    clock.advance(1)
    late = setup.enqueue("org-b", "work", {"site": "s0"}).job

    for batch in (1, 10):
        bound = math.ceil(orgs / batch)
        fair = JobService(pg_store, registry, clock, fair_claim=True)
        took = _claims_until(fair, batch, late.id, bound)
        assert took is not None, f"{orgs} orgs, claims of {batch}: not within {bound} claims"
        with pg_engine.begin() as conn:
            conn.execute(RESET_SQL)

    # the control: first in, first out, B's job waits behind A's whole backlog
    plain = JobService(pg_store, registry, clock, fair_claim=False)
    assert _claims_until(plain, 10, late.id, math.ceil(orgs / 10) + 1) is None
