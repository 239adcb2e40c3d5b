"""A parent that waits for its children without a slot, on every adapter (decision 0043): a
handler that enqueued children ends its attempt with ``ctx.wait_for_children()``; the job is
``waiting`` (never claimed), its children written with that outcome; once they have all ended,
whatever their ends, one release queues it and its next run reads them with ``ctx.awaited()``.
The attempt is handed back (it spends no attempt); a wait that lost its job writes nothing."""

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
    Status,
    Wait,
    domain,
)
from jobs_core.domain import Done, Failed, Patch
from jobs_core.events import START, EventFeed
from jobs_core.history import AttemptOutcome
from jobs_core.parents import NothingToWaitFor
from jobs_core.ports import ClaimNext
from jobs_core.runner import execute

from jobs_contract.events import everything
from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import handler_context

ORG = "org-a"


def crawl(ctx: JobContext) -> Mapping[str, Any]:
    """Fans out its pages and waits for them; run again, it reports how they ended (and, with
    ``twice``, fans out once more first)."""
    seen = ctx.awaited()
    rounds = 2 if ctx.payload.get("twice") else 1
    waited = len({job.id for job in seen.jobs})
    if waited < rounds * len(ctx.payload["pages"]):
        ctx.enqueue_many("fetch", [{"url": page} for page in ctx.payload["pages"]])
        if ctx.payload.get("now"):
            ctx.enqueue("fetch", {"url": "now"}, immediately=True)
        ctx.wait_for_children(report={"waiting_on": len(ctx.payload["pages"])})
    counts = seen.counts
    return {"done": counts[Status.DONE], "failed": counts[Status.FAILED], "total": len(seen.jobs)}


def immediate(ctx: JobContext) -> Mapping[str, Any] | None:
    """Enqueues one child at once and waits for it (the test ends the child first)."""
    if not ctx.awaited().jobs:
        ctx.enqueue("fetch", {"url": "x"}, immediately=True)
        ctx.wait_for_children()
    return {"children": len(ctx.awaited().jobs)}


def _registry() -> Registry:
    registry = Registry("parents")
    registry.register(JobType("crawl", crawl))
    registry.register(JobType("immediate", immediate))
    registry.register(JobType("lonely", lambda ctx: ctx.wait_for_children()))
    registry.register(JobType("fetch", lambda ctx: None))
    return registry


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return JobService(store, _registry(), clock)


def _attempt(service: JobService, clock: FakeClock, job: Job) -> tuple[Job, Any]:
    """Claim ``job`` (it must be the next due of its type) and run its handler."""
    [held] = service.claim(1, [job.type])
    assert held.id == job.id
    ctx = handler_context(service, held, clock, awaited=service.awaited)
    return held, execute(service.registry.get(job.type), ctx, clock.now)


def _children(store: JobStore, parent: Job) -> list[Job]:
    every = store.list_jobs(ORG, JobFilter(limit=500))
    return sorted((j for j in every if j.parent_id == parent.id), key=lambda j: j.id)


def _end(service: JobService, job: Job, outcome: Done | Failed) -> None:
    [held] = service.claim(1, ["fetch"])
    assert held.id == job.id
    assert service.complete(held.ref, outcome) is not None


def test_a_parent_waits_without_a_slot_then_runs_again_with_its_childrens_ends(
    service: JobService, clock: FakeClock
) -> None:
    parent = service.enqueue(ORG, "crawl", {"pages": ["a", "b", "c"]}).job
    held, outcome = _attempt(service, clock, parent)
    assert isinstance(outcome, Wait)
    assert len(outcome.children) == 3
    waiting = service.complete(held.ref, outcome)
    assert waiting is not None
    assert waiting.status is Status.WAITING
    assert waiting.attempts == 0  # handed back: a wait spends no attempt
    assert waiting.lease is None
    assert waiting.report == {"waiting_on": 3}
    kids = _children(service.store, parent)
    assert [k.status for k in kids] == [Status.QUEUED] * 3
    summary = service.awaited(ORG, parent.id)
    assert [j.id for j in summary.jobs] == [k.id for k in kids]  # in the order enqueued

    assert service.claim(10, ["crawl"]) == []  # waiting: never claimed
    _end(service, kids[0], Done())
    _end(service, kids[1], Failed(error="404"))
    assert service.release_waiting() == []  # one is left
    assert service.get(ORG, parent.id).status is Status.WAITING
    _end(service, kids[2], Done())
    [released] = service.release_waiting()
    assert (released.id, released.status) == (parent.id, Status.QUEUED)
    assert service.release_waiting() == []  # released once

    again, outcome = _attempt(service, clock, parent)
    assert again.attempts == 1  # its next run: the wait did not count
    assert again.lease != held.lease  # a run of its own
    assert outcome == Done(report={"done": 2, "failed": 1, "total": 3})
    done = service.complete(again.ref, outcome)
    assert done is not None
    assert done.status is Status.DONE
    assert len(_children(service.store, parent)) == 3  # none written twice
    records = service.attempts(ORG, parent.id)
    assert [r.outcome for r in records] == [AttemptOutcome.WAITING, AttemptOutcome.DONE]


def test_the_wait_is_an_event_of_its_own(
    service: JobService, clock: FakeClock, jobs_event_feed: EventFeed
) -> None:
    parent = service.enqueue(ORG, "crawl", {"pages": ["a"]}).job
    held, outcome = _attempt(service, clock, parent)
    service.complete(held.ref, outcome)
    [kid] = _children(service.store, parent)
    _end(service, kid, Done())
    service.release_waiting()
    events = [
        e.kind.value for e in everything(jobs_event_feed, START, ORG) if e.job.id == parent.id
    ]
    assert events == ["enqueued", "claimed", "waiting", "requeued"]


def test_children_that_already_ended_release_the_parent_at_once(
    service: JobService, clock: FakeClock
) -> None:
    parent = service.enqueue(ORG, "immediate", {}).job
    held, outcome = _attempt(service, clock, parent)
    assert isinstance(outcome, Wait)
    assert outcome.children == ()
    [kid] = _children(service.store, parent)
    assert outcome.awaits == (kid.id,)
    _end(service, kid, Done())  # ended before the parent's outcome is written
    released = service.complete(held.ref, outcome)
    assert released is not None
    assert released.status is Status.QUEUED  # nothing left to wait for
    assert service.release_waiting() == []
    _, outcome = _attempt(service, clock, parent)
    assert outcome == Done(report={"children": 1})


def test_a_parent_may_wait_again_for_a_second_round(service: JobService, clock: FakeClock) -> None:
    parent = service.enqueue(ORG, "crawl", {"pages": ["a", "b"], "twice": True}).job
    for _ in range(2):
        held, outcome = _attempt(service, clock, parent)
        assert isinstance(outcome, Wait)
        service.complete(held.ref, outcome)
        for kid in _children(service.store, parent):
            if kid.status is Status.QUEUED:
                _end(service, kid, Done())
        [released] = service.release_waiting()
        assert released.id == parent.id
    _, outcome = _attempt(service, clock, parent)
    assert outcome == Done(report={"done": 4, "failed": 0, "total": 4})


def test_a_wait_with_nothing_to_wait_for_fails_the_attempt(
    service: JobService, clock: FakeClock
) -> None:
    job = service.enqueue(ORG, "lonely", {}).job
    _, outcome = _attempt(service, clock, job)
    assert isinstance(outcome, Failed)
    assert NothingToWaitFor.__name__ in (outcome.error or "")


def test_a_wait_that_lost_its_job_writes_nothing(service: JobService, clock: FakeClock) -> None:
    parent = service.enqueue(ORG, "crawl", {"pages": ["a", "b"]}).job
    held, outcome = _attempt(service, clock, parent)
    clock.advance(3600)
    service.sweep(60)  # the attempt is lost: the job is queued again under another lease
    assert service.complete(held.ref, outcome) is None
    assert _children(service.store, parent) == []
    assert service.awaited(ORG, parent.id).jobs == []
    assert service.get(ORG, parent.id).status is Status.QUEUED


def test_a_parent_asked_to_cancel_while_it_ran_is_cancelled_instead_of_waiting(
    service: JobService, clock: FakeClock
) -> None:
    parent = service.enqueue(ORG, "crawl", {"pages": ["a"]}).job
    held, outcome = _attempt(service, clock, parent)
    service.cancel(ORG, parent.id)  # a request: it is running
    ended = service.complete(held.ref, outcome)
    assert ended is not None
    assert ended.status is Status.CANCELLED
    [kid] = _children(service.store, parent)  # its children were written: they run
    assert kid.status is Status.QUEUED


def test_the_finish_and_claim_of_one_write_gives_the_wait_its_edges(
    service: JobService, clock: FakeClock
) -> None:
    parent = service.enqueue(ORG, "crawl", {"pages": ["a", "b"]}).job
    held, outcome = _attempt(service, clock, parent)
    patch = service.store.complete(
        [_patch(held, outcome, clock)], claim_next=ClaimNext(10, clock.now(), ["crawl"])
    )
    assert patch.claimed == []  # the waiting parent is not claimed back by its own write
    [waiting] = patch.finished
    assert waiting is not None
    assert waiting.status is Status.WAITING
    assert len(service.awaited(ORG, parent.id).jobs) == 2
    for kid in _children(service.store, parent):
        _end(service, kid, Done())
    [released] = service.release_waiting()
    assert released.id == parent.id


def _patch(held: Job, outcome: Any, clock: FakeClock) -> Patch:
    return domain.patch(held.ref, outcome, clock.now())
