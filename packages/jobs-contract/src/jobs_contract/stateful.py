"""A property-based stateful test of the store contract (hypothesis ``RuleBasedStateMachine``).

Random sequences of enqueue (with and without keys, both scopes), claim, heartbeat, finish
(done, failed, cancelled, retryable re-queue), sweep under a moving fake clock, cancel and retry
are driven against the store; after every step the invariants of docs/contract.md §7 are checked on
what the store reports. Part of the contract suite, so it runs on every adapter.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from jobs_core import (
    AttemptRef,
    Cancelled,
    DedupConflict,
    Done,
    Failed,
    FakeClock,
    InvalidTransition,
    Job,
    JobFilter,
    JobNotFound,
    JobService,
    JobStore,
    Outcome,
    Requeue,
    Status,
)

from jobs_contract import STATE_MACHINE_EXAMPLES
from jobs_contract.helpers import make_registry

ORGS = ("org-a", "org-b")
THRESHOLD_S = 600.0
ALLOWED = {
    (Status.QUEUED, Status.RUNNING),
    (Status.QUEUED, Status.CANCELLED),
    (Status.RUNNING, Status.DONE),
    (Status.RUNNING, Status.FAILED),
    (Status.RUNNING, Status.CANCELLED),
    (Status.RUNNING, Status.QUEUED),
    (Status.FAILED, Status.QUEUED),
    (Status.CANCELLED, Status.QUEUED),
}


class StoreMachine(RuleBasedStateMachine):
    """Drives one store through random histories and checks the invariants after each step."""

    make_store: Callable[[], JobStore]

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.failed_hook: list[Job] = []
        self.service = JobService(
            type(self).make_store(), make_registry(self.failed_hook), self.clock
        )
        self.store = self.service.store
        self.known: dict[uuid.UUID, Job] = {}
        self.held: list[AttemptRef] = []

    # -- helpers -----------------------------------------------------------------------------
    def snapshot(self) -> dict[uuid.UUID, Job]:
        jobs: dict[uuid.UUID, Job] = {}
        for org in ORGS:
            for job in self.store.list_jobs(org, JobFilter(limit=100_000)):
                jobs[job.id] = job
        return jobs

    # -- rules -------------------------------------------------------------------------------
    @rule(
        org=st.sampled_from(ORGS),
        type_name=st.sampled_from(["reconcile", "crawl"]),
        key=st.sampled_from([None, "k1", "k2"]),
    )
    def enqueue(self, org: str, type_name: str, key: str | None) -> None:
        result = self.service.enqueue(org, type_name, {"n": len(self.known)}, dedup_key=key)
        if result.created:
            assert result.job.status is Status.QUEUED
            self.known[result.job.id] = result.job
        else:
            assert key is not None
            assert result.job.dedup_key == key
            assert result.job.org_id == org
        self.clock.advance(0.001)

    @rule(limit=st.integers(min_value=1, max_value=4))
    def claim(self, limit: int) -> None:
        claimed = self.store.claim(limit, self.clock.now())
        for job in sorted(claimed, key=lambda j: (j.created_at, j.id)):
            assert job.status is Status.RUNNING
            assert job.attempts >= 1
            self.held.append(job.ref)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        refs = data.draw(st.lists(st.sampled_from(self.held), max_size=3, unique=True))
        alive = self.store.heartbeat(refs, self.clock.now())
        assert alive <= {r.job_id for r in refs}

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), kind=st.sampled_from(["done", "failed", "cancelled", "requeue"]))
    def finish(self, data: st.DataObject, kind: str) -> None:
        ref = data.draw(st.sampled_from(self.held))
        now = self.clock.now()
        outcomes: dict[str, Outcome] = {
            "done": Done({"ok": True}),
            "failed": Failed("broken"),
            "cancelled": Cancelled(),
            "requeue": Requeue(run_at=now + timedelta(seconds=2)),
        }
        outcome = outcomes[kind]
        before = self.snapshot().get(ref.job_id)
        result = self.service.complete(ref, outcome)
        if result is None:
            # only a lost lease may refuse a finish
            assert (
                before is None or before.status is not Status.RUNNING or before.lease != ref.lease
            )
        else:
            assert before is not None
            assert before.lease == ref.lease
            if kind == "requeue" and before.cancel_requested_at is not None:
                # a cancel request made during the attempt outlives it (domain.cancel_now):
                # the re-queued job is cancelled at once, and its key released
                assert result.status is Status.CANCELLED
                assert result.dedup_key is None
            elif kind == "requeue":
                assert result.status is Status.QUEUED
                assert result.dedup_key == before.dedup_key  # never takes a released key back

    @rule(seconds=st.sampled_from([0.5, 3.0, 300.0, 601.0]))
    def advance_and_sweep(self, seconds: float) -> None:
        self.clock.advance(seconds)
        report = self.service.sweep(THRESHOLD_S)
        for job in report.requeued + report.failed + report.cancelled:
            assert job.attempts <= job.max_attempts

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = self.known[data.draw(st.sampled_from(list(self.known)))]
        try:
            self.service.cancel(job.org_id, job.id)
        except InvalidTransition:
            assert self.store.get(job.org_id, job.id).status.is_finished  # type: ignore[union-attr]

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        job = self.known[data.draw(st.sampled_from(list(self.known)))]
        try:
            retried = self.service.retry(job.org_id, job.id)
        except InvalidTransition:
            current = self.store.get(job.org_id, job.id)
            assert current is not None
            assert current.status not in (Status.FAILED, Status.CANCELLED)
        except DedupConflict:
            current = self.store.get(job.org_id, job.id)
            assert current is not None
            assert current.requested_dedup_key is not None
            assert self.store.find_by_dedup_key(job.org_id, current.requested_dedup_key)
        else:
            assert retried.attempts == 0
            assert retried.status is Status.QUEUED

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def foreign_org_sees_nothing(self, data: st.DataObject) -> None:
        job = self.known[data.draw(st.sampled_from(list(self.known)))]
        foreign = ORGS[1] if job.org_id == ORGS[0] else ORGS[0]
        assert self.store.get(foreign, job.id) is None
        try:
            self.service.cancel(foreign, job.id)
        except JobNotFound:
            pass
        else:
            raise AssertionError("a foreign org cancelled a job")

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def invariants_hold(self) -> None:
        now_jobs = self.snapshot()
        # nothing lost: every job ever created is still there
        assert set(self.known) <= set(now_jobs)
        for job_id, job in now_jobs.items():
            previous = self.known.get(job_id)
            assert previous is not None, "a job appeared that nobody enqueued"
            # no illegal transition
            if previous.status is not job.status:
                assert (previous.status, job.status) in ALLOWED, (previous.status, job.status)
            # attempts never above max_attempts
            assert 0 <= job.attempts <= job.max_attempts
            # keys: finished jobs and running 'queue'-scope jobs hold none
            if job.status.is_finished or (
                job.status is Status.RUNNING and job.dedup_scope.value == "queue"
            ):
                assert job.dedup_key is None
            assert (job.status is Status.RUNNING) == (job.lease is not None)
            self.known[job_id] = job
        # key uniqueness among holders, per org
        holders = Counter((j.org_id, j.dedup_key) for j in now_jobs.values() if j.dedup_key)
        assert all(n == 1 for n in holders.values()), holders
        # no job held by two attempts: at most one of the refs ever handed out is valid per job
        valid = Counter(
            ref.job_id
            for ref in self.held
            if (held := now_jobs.get(ref.job_id)) is not None
            and held.status is Status.RUNNING
            and held.lease == ref.lease
        )
        assert all(n == 1 for n in valid.values()), valid
        # on_fail was called exactly for the jobs that became failed through the service
        assert all(j.status is Status.FAILED or j.id in self.known for j in self.failed_hook)


def _machine_for(make_store: Callable[[], JobStore]) -> type[StoreMachine]:
    return type("BoundStoreMachine", (StoreMachine,), {"make_store": staticmethod(make_store)})


@pytest.fixture
def store_factory(jobs_store_factory: Callable[[], JobStore]) -> Callable[[], JobStore]:
    """A fresh empty store per hypothesis example, of the adapter under test."""
    return jobs_store_factory


@pytest.fixture
def examples(request: pytest.FixtureRequest) -> int:
    """The adapter's ``jobs_state_machine_examples`` if it provides one, else the default."""
    try:
        value: int = request.getfixturevalue("jobs_state_machine_examples")
    except pytest.FixtureLookupError:
        return STATE_MACHINE_EXAMPLES
    return value


def test_store_state_machine(store_factory: Callable[[], JobStore], examples: int) -> None:
    run_state_machine_as_test(
        _machine_for(store_factory),
        settings=settings(
            max_examples=examples,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
