"""The transitions as data (decision 0020): what each store writes is exactly what the core
computed. A claim is :func:`jobs_core.domain.claim` of the row it took; an outcome is
:func:`jobs_core.domain.apply` of its :class:`~jobs_core.domain.Patch` to the held row; a
heartbeat, a progress save and a cancel are the domain's functions of the row; the sweep's
fence is the heartbeat it read. The same on every adapter.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from jobs_core import (
    Cancelled,
    Done,
    Failed,
    FakeClock,
    InvalidTransition,
    Job,
    JobService,
    JobStore,
    Requeue,
    Status,
    domain,
)
from jobs_core.domain import Outcome
from jobs_core.ports import ClaimNext

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, service_for

ORG = "acme"
THRESHOLD_S = 600


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    """The use cases over the store under test."""
    return service_for(store, clock)


def _read(store: JobStore, job: Job) -> Job:
    current = store.get(job.org_id, job.id)
    assert current is not None
    return current


def _claimed_as_the_domain_says(store: JobStore, before: Job, after: Job, now: datetime) -> None:
    assert after.lease is not None
    assert after == domain.claim(before, after.lease, now)
    assert _read(store, after) == after


def test_a_claim_writes_domain_claim_of_each_row_it_takes(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    queued = service.enqueue(ORG, "reconcile", {"i": 1}, dedup_key="reconcile:1").job
    clock.advance(0.001)
    active = service.enqueue(ORG, "crawl", {"i": 2}, dedup_key="crawl:2").job
    clock.advance(1)
    before = {job.id: _read(store, job) for job in (queued, active)}
    claimed = store.claim(5, clock.now())
    assert [j.id for j in claimed] == [queued.id, active.id]
    for job in claimed:
        _claimed_as_the_domain_says(store, before[job.id], job, clock.now())
    assert claimed[0].dedup_key is None  # queue scope: released at claim
    assert claimed[1].dedup_key == "crawl:2"  # active scope: held
    assert {j.heartbeat_at for j in claimed} == {clock.now()}


def test_the_claim_sent_with_outcomes_is_domain_claim_too(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile", {"i": 1})
    clock.advance(0.001)
    nxt = service.enqueue(ORG, "reconcile", {"i": 2}).job
    running = claim_one(service)
    clock.advance(1)
    before = _read(store, nxt)
    change = domain.patch(running.ref, Done({"ok": True}), clock.now())
    finished, claimed = store.complete([change], claim_next=ClaimNext(1, clock.now()))
    assert finished == [domain.apply(running, change)]
    [taken] = claimed
    _claimed_as_the_domain_says(store, before, taken, clock.now())


LATER = datetime.fromisoformat("2031-01-01T12:00:00+00:00")
OUTCOMES: dict[str, Outcome] = {
    "done": Done({"rows": 3}),
    "done-without-report": Done(),
    "failed": Failed("broke", {"trace": "x"}),
    "cancelled": Cancelled({"stopped_at": 2}),
    "requeue": Requeue(run_at=LATER, error="later", report={"retry": 1}),
    "requeue-keeping-the-report": Requeue(run_at=LATER),
    "hand-back": Requeue(run_at=LATER, refund_attempt=True),
    "snooze": Requeue(run_at=LATER, snooze=True),
}


def _held_with_history(service: JobService, store: JobStore, clock: FakeClock, kind: str) -> Job:
    """A running ``kind`` job on its second attempt, with a report and progress from the first
    and a cancellation request pending: every column a patch must leave or set is non-trivial."""
    service.enqueue(ORG, kind, {"k": 1}, dedup_key=f"{kind}:h")
    first = claim_one(service)
    back = domain.patch(first.ref, Requeue(run_at=clock.now(), report={"partial": 1}), clock.now())
    store.save_progress(first.ref, {"done": 1, "total": 2}, clock.now())
    assert store.complete([back]).finished[0] is not None
    clock.advance(1)
    held = claim_one(service)
    assert held.attempts == 2
    assert service.cancel(ORG, held.id).cancel_requested_at == clock.now()
    clock.advance(1)
    return held


@pytest.mark.parametrize("kind", ["reconcile", "crawl"])
@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_an_outcome_writes_exactly_its_patch(
    service: JobService, store: JobStore, clock: FakeClock, name: str, kind: str
) -> None:
    held = _held_with_history(service, store, clock, kind)
    row = _read(store, held)
    change = domain.patch(held.ref, OUTCOMES[name], clock.now())
    [written] = store.complete([change]).finished
    assert written is not None
    assert written == domain.apply(row, change)
    assert _read(store, held) == written
    assert written.lease is None
    assert written.progress == row.progress  # never part of a patch
    if change.clears_cancel_request:
        assert written.status is Status.QUEUED
        assert written.cancel_requested_at is None
    else:
        assert written.status.is_finished
        assert written.cancel_requested_at == row.cancel_requested_at
        assert written.dedup_key is None
        assert written.finished_at == clock.now()


def test_a_patch_whose_attempt_lost_the_job_writes_nothing(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    done = domain.patch(running.ref, Done({"first": True}), clock.now())
    again = domain.patch(running.ref, Failed("second"), clock.now())
    assert store.complete([done, again]).finished == [domain.apply(running, done), None]
    assert store.complete([again]).finished == [None]
    assert _read(store, running).report == {"first": True}


def test_heartbeat_and_progress_are_the_domain_functions(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    clock.advance(5)
    assert store.heartbeat([running.ref], clock.now()) == {running.id}
    beaten = domain.heartbeat(running, clock.now())
    assert _read(store, running) == beaten
    assert beaten.heartbeat_at == clock.now()
    assert domain.parse_heartbeat(beaten.progress) == clock.now()  # the public mark stays
    clock.advance(5)
    document: Mapping[str, Any] = {"done": 1, "total": 4}
    assert store.save_progress(running.ref, dict(document), clock.now())
    assert _read(store, running) == domain.save_progress(beaten, document, clock.now())


def test_the_sweep_reads_heartbeat_at_and_its_patch_is_fenced_on_it(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    service.enqueue(ORG, "reconcile")
    running = claim_one(service)
    clock.advance(THRESHOLD_S - 1)
    store.heartbeat([running.ref], clock.now())
    clock.advance(THRESHOLD_S - 1)
    stale_before = clock.now() - timedelta(seconds=THRESHOLD_S)
    assert store.find_stale(stale_before, 10) == []  # the heartbeat counts, not the start
    clock.advance(2)
    stale_before = clock.now() - timedelta(seconds=THRESHOLD_S)
    [found] = store.find_stale(stale_before, 10)
    assert (
        found.last_seen_at == found.heartbeat_at == clock.now() - timedelta(seconds=THRESHOLD_S + 1)
    )
    sweep = domain.sweep_patch(found, clock.now())
    assert found.heartbeat_at is not None
    assert sweep.seen_at == found.heartbeat_at
    other_beat = found.heartbeat_at - timedelta(microseconds=1)
    late = domain.patch(found.ref, domain.sweep_outcome(found, clock.now()), clock.now(),
                        seen_at=other_beat)  # fmt: skip
    assert store.complete([late]).finished == [None]
    [swept] = store.complete([sweep]).finished
    assert swept == domain.apply(found, sweep)
    assert swept is not None
    assert swept.status is Status.QUEUED


@pytest.mark.parametrize("status", [Status.QUEUED, Status.RUNNING, Status.DONE])
def test_cancel_is_domain_cancel_of_the_row(
    service: JobService, store: JobStore, clock: FakeClock, status: Status
) -> None:
    job = service.enqueue(ORG, "reconcile").job
    if status is not Status.QUEUED:
        running = claim_one(service)
        if status is Status.DONE:
            store.complete([domain.patch(running.ref, Done(), clock.now())])
    clock.advance(1)
    row = _read(store, job)
    if status is Status.DONE:
        with pytest.raises(InvalidTransition):
            domain.cancel(row, clock.now())
        with pytest.raises(InvalidTransition):
            store.cancel(ORG, job.id, clock.now())
        return
    expected = domain.cancel(row, clock.now())
    assert store.cancel(ORG, job.id, clock.now()) == expected
    assert _read(store, job) == expected
    clock.advance(1)
    if status is Status.RUNNING:  # asked once: asking again changes nothing
        assert domain.cancel(expected, clock.now()) is expected
        assert store.cancel(ORG, job.id, clock.now()) == expected
    else:  # cancelled at once: finished
        with pytest.raises(InvalidTransition):
            store.cancel(ORG, job.id, clock.now())


def test_unknown_job_patch_writes_nothing(store: JobStore, clock: FakeClock) -> None:
    ghost = domain.new_job(domain.NewJob(ORG, "reconcile"), uuid.uuid4(), clock.now())
    running = domain.claim(ghost, uuid.uuid4(), clock.now())
    assert store.complete([domain.patch(running.ref, Done(), clock.now())]).finished == [None]
