"""The testing kit's ``ctx.enqueue`` (decision 0038), as the stores do it: children written with
a done outcome, none after a failure or a retry, ``immediately=True`` at once; and what an
``assert_enqueued`` failure shows of the jobs there are (their errors); each run's own id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import JobContext, JobType, Registry, RetryPolicy, Status, UnknownJobType
from jobs_core.testing import JobsHarness


class Later(Exception):
    """Declared retryable."""


def crawl(ctx: JobContext) -> Mapping[str, Any]:
    ctx.enqueue_many("fetch", [{"url": url} for url in ctx.payload["urls"]])
    if ctx.payload.get("log"):
        ctx.enqueue("fetch", {"url": "log"}, immediately=True)
    if ctx.payload.get("unknown"):
        ctx.enqueue("nope")
    if ctx.payload.get("retry_once") and ctx.attempt == 1:
        raise Later("not yet")
    if ctx.payload.get("fail"):
        raise ValueError("the site is gone")
    return {"urls": len(ctx.payload["urls"])}


@pytest.fixture
def harness() -> JobsHarness:
    registry = Registry("kit-children")
    registry.register(JobType("crawl", crawl, retry=RetryPolicy(retry_on=(Later,))))
    registry.register(JobType("fetch", lambda ctx: {"url": ctx.payload["url"]}))
    return JobsHarness(registry)


def test_children_are_enqueued_with_a_done_outcome(harness: JobsHarness) -> None:
    parent = harness.enqueue("crawl", {"urls": ["a", "b"]})
    ran = harness.run_next("crawl")
    assert ran is not None
    assert ran.status is Status.DONE
    child = harness.assert_enqueued("fetch", {"url": "b"}, count=1, status=Status.QUEUED)
    assert child.parent_id == parent.id
    assert child.org_id == parent.org_id
    assert [job.report for job in harness.drain()] == [{"url": "a"}, {"url": "b"}]


def test_a_failed_attempt_leaves_no_children_but_those_enqueued_immediately(
    harness: JobsHarness,
) -> None:
    harness.enqueue("crawl", {"urls": ["a"], "fail": True, "log": True})
    ran = harness.run_next("crawl")
    assert ran is not None
    assert ran.status is Status.FAILED
    harness.assert_not_enqueued("fetch", {"url": "a"})
    harness.assert_enqueued("fetch", {"url": "log"}, count=1)


def test_a_retried_attempt_enqueues_its_children_once_when_it_succeeds(
    harness: JobsHarness,
) -> None:
    harness.enqueue("crawl", {"urls": ["a", "b"], "retry_once": True})
    first = harness.run_next("crawl")
    assert first is not None
    assert first.status is Status.QUEUED
    harness.assert_not_enqueued("fetch")
    harness.drain()
    harness.assert_enqueued("fetch", {"url": "a"}, count=1, status=Status.DONE)
    harness.assert_enqueued("fetch", count=2)


def test_an_unregistered_child_type_fails_the_attempt_with_its_name(
    harness: JobsHarness,
) -> None:
    harness.enqueue("crawl", {"urls": [], "unknown": True})
    ran = harness.run_next("crawl")
    assert ran is not None
    assert ran.status is Status.FAILED
    assert ran.error is not None
    assert "UnknownJobType" in ran.error
    assert "'nope'" in ran.error
    job = harness.claim()
    assert job is None
    with pytest.raises(UnknownJobType):
        harness.context(ran).enqueue("nope")


def test_an_assert_enqueued_failure_shows_the_error_of_each_job(harness: JobsHarness) -> None:
    harness.enqueue("crawl", {"urls": ["a"], "fail": True})
    harness.run_next("crawl")
    with pytest.raises(
        AssertionError, match=r"crawl failed .* error='ValueError: the site is gone'"
    ):
        harness.assert_enqueued("crawl", status=Status.DONE)


def test_each_run_has_its_own_id_though_a_snooze_keeps_the_attempt_number() -> None:
    seen: list[tuple[int, object]] = []

    def patient(ctx: JobContext) -> None:
        seen.append((ctx.attempt, ctx.run_id))
        if len(seen) == 1:
            ctx.snooze(5, "not yet")

    registry = Registry("runs")
    registry.register(JobType("patient", patient))
    harness = JobsHarness(registry)
    harness.enqueue("patient")
    [first, second] = [job.status for job in harness.drain()]
    assert (first, second) == (Status.QUEUED, Status.DONE)
    assert [attempt for attempt, _ in seen] == [1, 1]  # the snooze refunded the attempt
    assert seen[0][1] is not None
    assert seen[0][1] != seen[1][1]
