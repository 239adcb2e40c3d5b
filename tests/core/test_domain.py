"""Pure domain rules: transitions, the sweep decision, backoff, the registry, uuid7."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jobs_core import (
    MAX_ATTEMPTS_EXCEEDED,
    Cancelled,
    DedupScope,
    Done,
    DuplicateJobType,
    Failed,
    InvalidTransition,
    JobContext,
    JobType,
    NewJob,
    PayloadInvalid,
    Registry,
    Requeue,
    RetryPolicy,
    Status,
    UnknownJobType,
    constant,
    domain,
    exponential,
    jitter,
    uuid7,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def queued(**changes: Any) -> domain.Job:
    spec = NewJob(org_id="o", type="t", dedup_key="k", **changes)
    return domain.new_job(spec, uuid7(), NOW)


def noop(ctx: JobContext) -> None:
    return None


def test_claim_releases_the_key_only_for_queue_scope() -> None:
    lease = uuid.uuid4()
    for_queue = domain.claim(queued(dedup_scope=DedupScope.QUEUE), lease, NOW)
    for_active = domain.claim(queued(dedup_scope=DedupScope.ACTIVE), lease, NOW)
    assert for_queue.dedup_key is None
    assert for_active.dedup_key == "k"
    assert for_queue.requested_dedup_key == "k"
    assert (for_queue.status, for_queue.attempts, for_queue.lease) == (Status.RUNNING, 1, lease)


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Done({"a": 1}), Status.DONE),
        (Failed("x"), Status.FAILED),
        (Cancelled(), Status.CANCELLED),
        (Requeue(run_at=NOW), Status.QUEUED),
    ],
)
def test_finish_maps_each_outcome(outcome: domain.Outcome, status: Status) -> None:
    running = domain.claim(queued(dedup_scope=DedupScope.ACTIVE), uuid.uuid4(), NOW)
    later = NOW + timedelta(seconds=5)
    finished = domain.finish(running, outcome, later)
    assert finished.status is status
    assert finished.lease is None
    if status is Status.QUEUED:
        assert finished.dedup_key == "k"  # an active-scope key is still held
        assert finished.finished_at is None
    else:
        assert finished.dedup_key is None
        assert finished.finished_at == later


def test_illegal_moves_raise_a_typed_error() -> None:
    job = queued()
    with pytest.raises(InvalidTransition):
        domain.finish(job, Done(), NOW)
    with pytest.raises(InvalidTransition):
        domain.request_cancel(job, NOW)
    with pytest.raises(InvalidTransition):
        domain.retry(job, NOW)
    with pytest.raises(InvalidTransition):
        domain.check_deletable(job)
    running = domain.claim(job, uuid.uuid4(), NOW)
    with pytest.raises(InvalidTransition):
        domain.claim(running, uuid.uuid4(), NOW)
    with pytest.raises(InvalidTransition):
        domain.cancel_queued(running, NOW)
    done = domain.finish(running, Done(), NOW)
    with pytest.raises(InvalidTransition, match="cannot retry a job that is done"):
        domain.retry(done, NOW)
    with pytest.raises(InvalidTransition):
        _ = done.ref


def test_sweep_outcome_requeues_below_the_cap_and_fails_at_it() -> None:
    job = domain.claim(queued(max_attempts=2), uuid.uuid4(), NOW)
    assert isinstance(domain.sweep_outcome(job, NOW), Requeue)
    second = domain.claim(domain.finish(job, Requeue(run_at=NOW), NOW), uuid.uuid4(), NOW)
    outcome = domain.sweep_outcome(second, NOW)
    assert isinstance(outcome, Failed)
    assert outcome.error == MAX_ATTEMPTS_EXCEEDED


def test_a_shutdown_hands_a_running_job_back_unless_its_cancellation_was_requested() -> None:
    job = domain.claim(queued(max_attempts=1), uuid.uuid4(), NOW)
    outcome = domain.hand_back_outcome(job, NOW, cancel_requested=False)
    assert outcome == Requeue(run_at=NOW, refund_attempt=True)
    back = domain.finish(job, outcome, NOW)
    assert back.status is Status.QUEUED
    assert back.attempts == 0  # the attempt is refunded: a deploy spends no max_attempts
    cancelled = domain.hand_back_outcome(job, NOW, cancel_requested=True)
    assert cancelled == domain.Cancelled(report={"reason": domain.HANDED_BACK_CANCELLED})
    assert domain.finish(job, cancelled, NOW).status is Status.CANCELLED


def test_an_outage_is_recognised_by_the_store_error_or_its_explicit_cause() -> None:
    from jobs_core import StoreRefused, StoreUnavailable
    from jobs_core.errors import is_outage

    assert is_outage(StoreUnavailable())
    assert is_outage(TimeoutError())
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = StoreUnavailable()
    assert is_outage(wrapped)
    refused = StoreRefused("too long")
    refused.__cause__ = StoreUnavailable()
    assert not is_outage(refused)  # a refusal is never retried, whatever caused it
    during = ValueError("a bug while handling an outage")
    during.__context__ = StoreUnavailable()
    assert not is_outage(during)
    loop = RuntimeError("loop")
    loop.__cause__ = loop
    assert not is_outage(loop)


def test_staleness_uses_the_later_of_heartbeat_and_start() -> None:
    running = domain.claim(queued(), uuid.uuid4(), NOW)
    assert domain.is_stale(running, NOW + timedelta(seconds=1))
    old_beat = domain.heartbeat_progress(None, NOW - timedelta(hours=1))
    with_old_checkpoint = domain.claim(queued(), uuid.uuid4(), NOW)
    with_old_checkpoint = dataclasses.replace(with_old_checkpoint, progress=old_beat)
    assert not domain.is_stale(with_old_checkpoint, NOW - timedelta(seconds=1))
    fresh = domain.heartbeat(running, NOW + timedelta(minutes=5))
    assert not domain.is_stale(fresh, NOW + timedelta(minutes=1))
    assert not domain.is_stale(queued(), NOW + timedelta(days=1))


def test_parse_heartbeat_ignores_garbage() -> None:
    assert domain.parse_heartbeat(None) is None
    assert domain.parse_heartbeat({"updated_at": 3}) is None
    assert domain.parse_heartbeat({"updated_at": "yesterday"}) is None
    assert domain.parse_heartbeat({"updated_at": "2026-01-01T00:00:00"}) is None  # naive
    assert domain.parse_heartbeat({"updated_at": NOW.isoformat()}) == NOW


def test_exponential_backoff_defaults_to_2_4_8_seconds() -> None:
    policy = RetryPolicy()
    assert [policy.delay_after(n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert exponential(base_s=1, cap_s=5)(10) == 5.0
    assert constant(3)(7) == 3
    spread = jitter(constant(10), ratio=0.1)
    assert all(9.0 <= spread(1) <= 11.0 for _ in range(100))
    with pytest.raises(ValueError, match="exponential"):
        exponential(factor=0.5)


def test_no_error_is_retryable_unless_declared() -> None:
    assert not RetryPolicy().is_retryable(RuntimeError("x"))
    declared = RetryPolicy(retry_on=(TimeoutError,))
    assert declared.is_retryable(TimeoutError())
    assert not declared.is_retryable(ValueError())


def test_registry_refuses_duplicates_and_unknown_names() -> None:
    registry = Registry()
    registry.register(JobType("noop", noop))
    with pytest.raises(DuplicateJobType):
        registry.register(JobType("noop", noop))
    with pytest.raises(UnknownJobType):
        registry.get("nope")
    other = Registry("module")
    other.job_type("other", max_attempts=5)(noop)
    registry.include(other)
    assert registry.names() == ["noop", "other"]
    assert registry.get("other").max_attempts == 5
    with pytest.raises(DuplicateJobType):
        registry.include(other)


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "Bad Name"},
        {"max_attempts": 0},
        {"timeout_s": 0},
        {"retention_days": 0},
        {"protected": True, "retention_days": 30},
    ],
)
def test_job_type_declarations_are_validated(bad: dict[str, Any]) -> None:
    declarations: dict[str, Any] = {"name": "ok", "handler": noop, **bad}
    with pytest.raises(ValueError, match=r"\w"):
        JobType(**declarations)


class PositiveN:
    """A hand-written schema: {"n": positive int}."""

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        n = payload.get("n")
        if not isinstance(n, int) or n <= 0:
            raise PayloadInvalid([{"loc": ["n"], "msg": "n must be a positive integer"}])
        return {"n": n}

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}


def test_new_job_resolves_declarations_and_validates_the_payload() -> None:
    registry = Registry()
    registry.register(
        JobType(
            "count", noop, max_attempts=4, dedup_scope=DedupScope.ACTIVE, payload_schema=PositiveN()
        )
    )
    spec = registry.new_job("org", "count", {"n": 2, "ignored": True}, dedup_key="count:1")
    assert spec == NewJob(
        org_id="org",
        type="count",
        payload={"n": 2},
        dedup_key="count:1",
        dedup_scope=DedupScope.ACTIVE,
        max_attempts=4,
    )
    with pytest.raises(PayloadInvalid) as invalid:
        registry.new_job("org", "count", {"n": -1})
    assert invalid.value.errors == [{"loc": ["n"], "msg": "n must be a positive integer"}]
    with pytest.raises(PayloadInvalid):
        registry.new_job("org", "count", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="org_id"):
        registry.new_job("", "count", {"n": 1})
    with pytest.raises(ValueError, match="dedup_key"):
        registry.new_job("org", "count", {"n": 1}, dedup_key="")


def test_uuid7_is_version_7_and_time_ordered() -> None:
    ids = [uuid7() for _ in range(1000)]
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    millis = [i.int >> 80 for i in ids]
    assert millis == sorted(millis)
    assert len(set(ids)) == 1000


def test_new_jobs_are_the_new_job_of_each_spec() -> None:
    specs = [
        NewJob("org", "a", {"i": 1}),
        NewJob("org", "b", {"i": 2}, "key", DedupScope.ACTIVE, 7, NOW + timedelta(seconds=5)),
    ]
    ids = [uuid7(), uuid7()]
    jobs = domain.new_jobs(specs, ids, NOW)
    assert jobs == [domain.new_job(s, i, NOW) for s, i in zip(specs, ids, strict=True)]
    assert jobs[0].payload is not specs[0].payload  # the job's own copy
    with pytest.raises(ValueError, match="shorter"):
        domain.new_jobs(specs, ids[:1], NOW)


def test_a_patch_is_the_outcome_as_columns_and_apply_writes_them() -> None:
    running = domain.claim(queued(dedup_scope=DedupScope.ACTIVE), uuid.uuid4(), NOW)
    asked = domain.request_cancel(running, NOW + timedelta(seconds=1))
    later = NOW + timedelta(minutes=1)
    done = domain.patch(asked.ref, Done({"n": 1}), later)
    assert (done.status, done.finished_at, done.dedup_key, done.error) == (
        Status.DONE,
        later,
        None,
        None,
    )
    assert not done.clears_cancel_request
    ended = domain.apply(asked, done)
    assert ended.cancel_requested_at == asked.cancel_requested_at  # an end keeps the request
    assert ended.lease is None
    assert ended == domain.finish(asked, Done({"n": 1}), later)
    back = domain.patch(asked.ref, Requeue(run_at=later, refund_attempt=True), later)
    assert (back.status, back.attempts, back.dedup_key, back.finished_at) == (
        Status.QUEUED,
        0,
        "k",
        None,
    )
    assert domain.apply(asked, back).cancel_requested_at is None  # a re-queue clears it
    snoozed = domain.patch(asked.ref, Requeue(run_at=later, snooze=True), later)
    assert (snoozed.attempts, snoozed.snoozes) == (0, 1)


def test_applies_is_the_lease_fence_and_the_sweeps_heartbeat_fence() -> None:
    running = domain.claim(queued(), uuid.uuid4(), NOW)
    change = domain.sweep_patch(running, NOW + timedelta(hours=1))
    assert change.seen_at == NOW
    assert domain.applies(running, change)
    assert not domain.applies(domain.heartbeat(running, NOW + timedelta(seconds=1)), change)
    assert not domain.applies(domain.claim(queued(), uuid.uuid4(), NOW), change)  # another lease
    assert not domain.applies(None, change)


def test_cancel_is_now_for_a_queued_job_and_a_request_for_a_running_one() -> None:
    assert domain.cancel(queued(), NOW).status is Status.CANCELLED
    running = domain.claim(queued(), uuid.uuid4(), NOW)
    asked = domain.cancel(running, NOW)
    assert (asked.status, asked.cancel_requested_at) == (Status.RUNNING, NOW)
    assert domain.cancel(asked, NOW + timedelta(seconds=1)) is asked
    with pytest.raises(InvalidTransition):
        domain.cancel(domain.finish(running, Done(), NOW), NOW)


def test_a_hand_back_requeues_refunded_unless_cancellation_was_asked() -> None:
    running = domain.claim(queued(), uuid.uuid4(), NOW)
    back = domain.hand_back_outcome(running, NOW, cancel_requested=False)
    assert back == Requeue(run_at=NOW, refund_attempt=True)
    assert isinstance(domain.hand_back_outcome(running, NOW, cancel_requested=True), Cancelled)
    asked = domain.request_cancel(running, NOW)
    assert isinstance(domain.hand_back_outcome(asked, NOW, cancel_requested=False), Cancelled)
