"""What ``JobService`` tells its observer (``jobs_core.observe``, issue 24): created jobs, claimed
jobs with the claim's round trip, ended attempts with their records, after each store call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from jobs_core import Done, Failed, FakeClock, InMemoryJobStore, Job, JobService, JobType, Registry
from jobs_core.history import AttemptOutcome, Ended
from jobs_core.observe import active_state


@dataclass
class Observed:
    """An observer that keeps what it was told."""

    created: list[Job] = field(default_factory=list)
    claims: list[tuple[list[Job], float | None]] = field(default_factory=list)
    ends: list[tuple[list[Ended], float | None]] = field(default_factory=list)
    outages: int = 0

    def enqueued(self, jobs: Sequence[Job]) -> None:
        self.created.extend(jobs)

    def claimed(self, jobs: Sequence[Job], seconds: float | None) -> None:
        self.claims.append((list(jobs), seconds))

    def finished(self, ended: Sequence[Ended], seconds: float | None) -> None:
        self.ends.append((list(ended), seconds))

    def outage_began(self) -> None:
        self.outages += 1


def _service(observer: Observed, clock: FakeClock) -> JobService:
    registry = Registry("observe")
    registry.register(JobType("a", lambda ctx: None))
    registry.register(JobType("b", lambda ctx: None))
    return JobService(InMemoryJobStore(), registry, clock, observer=observer, worker="w:1")


def test_enqueues_claims_and_ends_are_told_once_each() -> None:
    clock = FakeClock()
    seen = Observed()
    service = _service(seen, clock)
    first = service.enqueue("org", "a").job
    service.enqueue("org", "a", dedup_key="k")
    assert service.enqueue("org", "a", dedup_key="k").created is False  # a dedup hit: not told
    service.enqueue_many("org", "b", [{}, {}])
    assert [job.type for job in seen.created] == ["a", "a", "b", "b"]

    clock.advance(2)
    claimed = service.claim(1)
    assert [job.id for job in claimed] == [first.id]
    [(jobs, seconds)] = seen.claims
    assert jobs == claimed
    assert seconds is not None
    assert seconds >= 0

    clock.advance(3)
    finished, more = service.complete_and_claim([(claimed[0].ref, Done())], 10)
    assert finished[0] is not None
    [(ended, write_s)] = seen.ends
    assert write_s is not None
    assert ended == [Ended("a", AttemptOutcome.DONE, 3.0)]
    assert seen.claims[-1] == (more, None)  # rode on the finish's round trip
    assert len(more) == 3

    stale = service.complete(claimed[0].ref, Failed(error="late"))  # applies to nothing
    assert stale is None
    assert seen.ends[-1][0] == []  # nothing ended


def test_the_sweep_tells_of_lost_attempts() -> None:
    clock = FakeClock()
    seen = Observed()
    service = _service(seen, clock)
    service.enqueue("org", "a")
    service.claim(1)
    clock.advance(601)
    service.sweep(600)
    [(ended, seconds)] = seen.ends
    assert seconds is None
    assert [(e.type, e.outcome) for e in ended] == [("a", AttemptOutcome.LOST)]


def test_active_state_counts_a_job_due_later_as_scheduled() -> None:
    clock = FakeClock()
    service = _service(Observed(), clock)
    later = service.enqueue("org", "a", run_at=clock.now() + timedelta(seconds=5)).job
    now = service.enqueue("org", "b").job
    assert active_state(later, clock.now()) == "scheduled"
    assert active_state(now, clock.now()) == "queued"
    assert active_state(later, clock.now() + timedelta(seconds=5)) == "queued"
    [running] = service.claim(1)
    assert active_state(running, clock.now()) == "running"
    done = service.complete(running.ref, Done())
    assert done is not None
    assert active_state(done, clock.now()) is None
