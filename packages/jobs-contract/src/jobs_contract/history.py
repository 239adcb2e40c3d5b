"""Every attempt of a job, kept (:class:`jobs_core.ports.History`, issue 24): each patch that
applies writes the record :func:`jobs_core.history.record_of` makes of it, numbered in the order
the attempts ended; a patch that does not apply writes none; the records go with the job."""

from __future__ import annotations

from datetime import timedelta

from jobs_core import FakeClock, JobService, JobStore, Status, domain
from jobs_core.domain import Done, Failed, Requeue
from jobs_core.history import AttemptOutcome, record_of

from jobs_contract.fixtures import (  # noqa: F401 (fixtures: pytest sees them)
    clock_fixture,
    failures_fixture,
    store_fixture,
)
from jobs_contract.helpers import claim_one, make_registry, run_claimed

ORG = "org-a"
WORKER = "host-1:4242"


def _service(store: JobStore, clock: FakeClock) -> JobService:
    return JobService(store, make_registry(), clock, worker=WORKER)


def test_every_attempt_of_a_retried_job_is_kept_with_its_error_and_traceback(
    store: JobStore, clock: FakeClock
) -> None:
    service = _service(store, clock)
    job = service.enqueue(ORG, "flaky").job
    starts = []
    for _ in range(3):
        clock.advance(5)  # past the backoff
        claimed = claim_one(service)
        starts.append(claimed.started_at)
        clock.advance(0.25)
        run_claimed(service, claimed, clock)
    assert service.get(ORG, job.id).status is Status.FAILED
    records = service.attempts(ORG, job.id)
    assert [r.attempt for r in records] == [1, 2, 3]
    assert [r.outcome for r in records] == [
        AttemptOutcome.RETRYING,
        AttemptOutcome.RETRYING,
        AttemptOutcome.FAILED,
    ]
    assert [r.started_at for r in records] == starts
    for record in records:
        assert record.job_id == job.id
        assert record.worker == WORKER
        assert record.duration_s == 0.25
        assert "try again later" in (record.error or "")
        assert "Flaky" in (record.traceback or "")
        assert "\n" in (record.traceback or "")


def test_a_record_is_exactly_record_of_the_patch(store: JobStore, clock: FakeClock) -> None:
    service = _service(store, clock)
    first = service.enqueue(ORG, "reconcile", {"n": 1}).job
    second = service.enqueue(ORG, "reconcile", {"n": 2}).job
    claimed = service.claim(2)
    assert {j.id for j in claimed} == {first.id, second.id}
    clock.advance(1.5)
    now = clock.now()
    patches = [
        domain.patch(claimed[0].ref, Done(report={"ok": True}), now, worker="w:1"),
        domain.patch(claimed[1].ref, Failed(error="no"), now, worker="w:2"),
    ]
    store.complete(patches)  # one write, two records
    for change in patches:
        assert store.attempts(ORG, change.ref.job_id) == [record_of(change, 1)]


def test_a_patch_that_does_not_apply_records_nothing(store: JobStore, clock: FakeClock) -> None:
    service = _service(store, clock)
    job = service.enqueue(ORG, "reconcile").job
    claimed = claim_one(service)
    clock.advance(1)
    assert service.complete(claimed.ref, Done()) is not None
    late = domain.patch(claimed.ref, Failed(error="late"), clock.now())
    assert store.complete([late]).finished == [None]
    assert [r.outcome for r in service.attempts(ORG, job.id)] == [AttemptOutcome.DONE]


def test_the_records_are_the_orgs_own(store: JobStore, clock: FakeClock) -> None:
    service = _service(store, clock)
    job = service.enqueue(ORG, "reconcile").job
    service.complete(claim_one(service).ref, Done())
    assert len(service.attempts(ORG, job.id)) == 1
    assert service.attempts("org-b", job.id) == []


def test_a_lost_and_a_handed_back_attempt_are_recorded_and_numbering_goes_on(
    store: JobStore, clock: FakeClock
) -> None:
    """The sweep records a lost attempt (its worker unknown); a hand-back and the attempts
    after a user's retry, whose claim numbers restart, are numbered after the earlier ones."""
    service = _service(store, clock)
    job = service.enqueue(ORG, "reconcile").job
    claim_one(service)
    clock.advance(601)
    assert [j.id for j in service.sweep(600).requeued] == [job.id]
    held = claim_one(service)
    clock.advance(1)
    handed_back = domain.hand_back_outcome(held, clock.now(), cancel_requested=False)
    assert isinstance(handed_back, Requeue)
    service.complete(held.ref, handed_back)
    service.complete(claim_one(service).ref, Failed(error="broke"))
    service.retry(ORG, job.id)
    service.complete(claim_one(service).ref, Done())
    records = service.attempts(ORG, job.id)
    assert [(r.attempt, r.outcome) for r in records] == [
        (1, AttemptOutcome.LOST),
        (2, AttemptOutcome.HANDED_BACK),
        (3, AttemptOutcome.FAILED),
        (4, AttemptOutcome.DONE),
    ]
    assert records[0].worker is None
    assert records[0].duration_s == timedelta(seconds=601).total_seconds()


def test_the_records_go_with_the_job(store: JobStore, clock: FakeClock) -> None:
    service = _service(store, clock)
    job = service.enqueue(ORG, "reconcile").job
    service.complete(claim_one(service).ref, Done())
    service.delete(ORG, job.id)
    assert service.attempts(ORG, job.id) == []
