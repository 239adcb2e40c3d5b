"""Children, on every adapter (decision 0038): what a handler enqueues with ``ctx.enqueue`` is
written with its attempt's outcome, only when the attempt ends done, once; with
``immediately=True`` at once. Each child is of its parent's org and names it as ``parent_id``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import (
    FakeClock,
    Job,
    JobContext,
    JobFilter,
    JobService,
    JobStore,
    JobType,
    Registry,
    RetryPolicy,
    Status,
    UnknownJobType,
    domain,
)
from jobs_core.domain import Done, Failed, Requeue
from jobs_core.ports import ClaimNext
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import QuotaExceeded, Quotas, QuotaStore
from jobs_core.runner import execute

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import handler_context

ORG = "org-a"


class Again(Exception):
    """Declared retryable by the ``fan_out`` type."""


def _registry() -> Registry:
    registry = Registry("children")

    def fan_out(ctx: JobContext) -> Mapping[str, Any]:
        pages = list(ctx.payload.get("pages", ()))
        ctx.enqueue_many("fetch", [{"url": page} for page in pages])
        if ctx.payload.get("keyed"):
            ctx.enqueue("fetch", {"url": "keyed"}, dedup_key=str(ctx.payload["keyed"]))
        if ctx.payload.get("now"):
            made = ctx.enqueue("fetch", {"url": "now"}, immediately=True)
            assert made is not None
            assert made.parent_id == ctx.job.id
        if ctx.payload.get("unknown"):
            ctx.enqueue("no-such-type", {})
        if ctx.payload.get("then_fail"):
            raise ValueError("after the enqueues")
        if ctx.payload.get("then_retry") and ctx.attempt == 1:
            raise Again("once more")
        return {"pages": len(pages)}

    registry.register(
        JobType("fan_out", fan_out, max_attempts=3, retry=RetryPolicy(retry_on=(Again,)))
    )
    registry.register(JobType("fetch", lambda ctx: None))
    return registry


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return JobService(store, _registry(), clock)


def _run(service: JobService, clock: FakeClock, payload: Mapping[str, Any]) -> tuple[Job, Any]:
    parent = service.enqueue(ORG, "fan_out", payload).job
    [held] = service.claim(1, ["fan_out"])
    assert held.id == parent.id
    outcome = execute(
        service.registry.get("fan_out"), handler_context(service, held, clock), clock.now
    )
    return held, outcome


def _children(store: JobStore, parent: Job) -> list[Job]:
    every = store.list_jobs(ORG, JobFilter(limit=500))
    return sorted((j for j in every if j.parent_id == parent.id), key=lambda j: j.id)


def test_children_are_written_with_a_done_outcome(service: JobService, clock: FakeClock) -> None:
    held, outcome = _run(service, clock, {"pages": ["a", "b", "c"]})
    assert isinstance(outcome, Done)
    assert len(outcome.children) == 3
    assert _children(service.store, held) == []  # held by the attempt until its outcome
    ended = service.complete(held.ref, outcome)
    assert ended is not None
    assert ended.status is Status.DONE
    assert ended.parent_id is None
    children = _children(service.store, held)
    assert [c.payload["url"] for c in children] == ["a", "b", "c"]
    assert all(c.org_id == ORG and c.status is Status.QUEUED for c in children)
    assert all(c.type == "fetch" and c.parent_id == held.id for c in children)
    got = service.get(ORG, children[0].id)
    assert got.parent_id == held.id  # read back from the store
    assert {j.id for j in service.claim(10)} == {c.id for c in children}


def test_a_failed_attempt_leaves_no_children(service: JobService, clock: FakeClock) -> None:
    held, outcome = _run(service, clock, {"pages": ["a"], "then_fail": True})
    assert isinstance(outcome, Failed)
    ended = service.complete(held.ref, outcome)
    assert ended is not None
    assert ended.status is Status.FAILED
    assert _children(service.store, held) == []


def test_a_retried_attempt_leaves_none_and_the_rerun_enqueues_them_once(
    service: JobService, clock: FakeClock
) -> None:
    held, outcome = _run(service, clock, {"pages": ["a", "b"], "then_retry": True})
    assert isinstance(outcome, Requeue)
    service.complete(held.ref, outcome)
    assert _children(service.store, held) == []
    clock.advance(3600)
    [again] = service.claim(1)
    assert again.id == held.id
    assert again.attempts == 2
    ctx = handler_context(service, again, clock)
    second = execute(service.registry.get("fan_out"), ctx, clock.now)
    assert isinstance(second, Done)
    service.complete(again.ref, second)
    assert [c.payload["url"] for c in _children(service.store, held)] == ["a", "b"]


def test_an_attempt_that_lost_its_job_writes_no_children(
    service: JobService, clock: FakeClock
) -> None:
    held, outcome = _run(service, clock, {"pages": ["a"]})
    stale = domain.patch(held.ref, Failed("swept"), clock.now())
    assert service.store.complete([stale]).finished[0] is not None  # another writer ended it
    assert service.complete(held.ref, outcome) is None
    assert _children(service.store, held) == []


def test_the_same_attempt_twice_in_a_batch_writes_its_children_once(
    service: JobService, clock: FakeClock
) -> None:
    held, outcome = _run(service, clock, {"pages": ["a", "b"]})
    change = domain.patch(held.ref, outcome, clock.now())
    first, second = service.store.complete([change, change]).finished
    assert first is not None
    assert second is None
    assert len(_children(service.store, held)) == 2


def test_children_are_written_with_a_claim_of_next_work(
    service: JobService, clock: FakeClock
) -> None:
    held, outcome = _run(service, clock, {"pages": ["a"]})
    service.enqueue(ORG, "fetch", {"url": "waiting"})
    change = domain.patch(held.ref, outcome, clock.now())
    done = service.store.complete([change], claim_next=ClaimNext(5, clock.now(), None))
    assert done.finished[0] is not None
    [child] = _children(service.store, held)
    # One snapshot: the claim of the same call may or may not see the new child; it sees the
    # job that was waiting, and the child is claimable afterwards if it did not take it.
    claimed = {j.id for j in done.claimed} | {j.id for j in service.claim(5)}
    assert child.id in claimed


def test_dedup_keys_hold_for_children(service: JobService, clock: FakeClock) -> None:
    holder = service.enqueue(ORG, "fetch", {"url": "first"}, dedup_key="site-1").job
    held, outcome = _run(service, clock, {"pages": [], "keyed": "site-1"})
    service.complete(held.ref, outcome)
    assert _children(service.store, held) == []  # its key was held: skipped, as any enqueue
    assert service.store.find_by_dedup_key(ORG, "site-1") == holder


def test_immediately_enqueues_at_once_whatever_the_attempt_comes_to(
    service: JobService, clock: FakeClock
) -> None:
    held, outcome = _run(service, clock, {"pages": ["later"], "now": True, "then_fail": True})
    # written during the attempt already
    assert [c.payload["url"] for c in _children(service.store, held)] == ["now"]
    service.complete(held.ref, outcome)
    assert [c.payload["url"] for c in _children(service.store, held)] == ["now"]


def test_an_unregistered_child_type_fails_the_attempt_clearly(
    service: JobService, clock: FakeClock
) -> None:
    held, outcome = _run(service, clock, {"pages": ["a"], "unknown": True})
    assert isinstance(outcome, Failed)
    assert "no-such-type" in outcome.error
    assert "UnknownJobType" in outcome.error
    service.complete(held.ref, outcome)
    assert _children(service.store, held) == []
    with pytest.raises(UnknownJobType):
        handler_context(service, held, clock).enqueue("no-such-type")


def test_children_are_admitted_under_the_orgs_quotas(
    service: JobService, clock: FakeClock, jobs_quota_store: QuotaStore
) -> None:
    for override in jobs_quota_store.overrides():  # an adapter keeps them across tests
        jobs_quota_store.clear_override(override.org_id)
    quotas = QuotaService(
        jobs_quota_store, Quotas(max_queued=3, enqueue_rate=100, enqueue_burst=100), clock
    )
    parent = service.enqueue(ORG, "fan_out", {"pages": ["a", "b", "c", "d"]}).job
    [held] = service.claim(1, ["fan_out"])
    context = handler_context(service, held, clock, admit=quotas.admit)
    with pytest.raises(QuotaExceeded, match="queued"):
        context.enqueue_many("fetch", [{"url": "a"}, {"url": "b"}, {"url": "c"}, {"url": "d"}])
    context.enqueue_many("fetch", [{"url": "a"}, {"url": "b"}])  # within the quota
    with pytest.raises(QuotaExceeded):  # 2 admitted + 2 more > 3
        context.enqueue_many("fetch", [{"url": "c"}, {"url": "d"}], immediately=True)
    assert len(context.children) == 2
    outcome = execute(service.registry.get("fan_out"), context, clock.now)
    assert isinstance(outcome, Failed)  # its own enqueue of four is over the quota
    assert "QuotaExceeded" in outcome.error
    service.complete(held.ref, outcome)
    assert _children(service.store, parent) == []
