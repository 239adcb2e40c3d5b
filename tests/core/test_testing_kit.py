"""The public testing kit (jobs_core.testing, docs/testing.md), used as a module author would:
through the ``jobs_harness`` fixture of its pytest plugin (the ``pytest11`` entry point of
jobs-core: no conftest of this repository defines it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from jobs_core import (
    CancelReason,
    FakeClock,
    Job,
    JobContext,
    JobTimeout,
    JobType,
    Registry,
    RetryPolicy,
    Status,
    constant,
)
from jobs_core.testing import JobsHarness, payload_matches


class Busy(Exception):
    """Declared retryable."""


class Module:
    """A small module: a crawl that fans out fetches, resumes from its checkpoint, cleans up."""

    def __init__(self) -> None:
        self.registry = Registry("kit")
        self.cancelled: list[Job] = []
        self.failed: list[Job] = []
        self.stopped: list[CancelReason | None] = []
        self.busy_left = 0

        def crawl(ctx: JobContext) -> Mapping[str, Any]:
            state = dict(ctx.resume or {"next": 0})
            pages = int(ctx.payload["pages"])
            while state["next"] < pages:
                if ctx.cancelled:
                    self.stopped.append(ctx.cancel_reason)
                    ctx.raise_if_cancelled()
                state["next"] += 1
                ctx.save_progress(state["next"], pages, checkpoint=state)
            return {"pages": pages}

        def fan_out(ctx: JobContext) -> None:
            for url in ctx.payload["urls"]:
                self.enqueue_fetch(url)

        def fetch(ctx: JobContext) -> Mapping[str, Any]:
            if self.busy_left:
                self.busy_left -= 1
                raise Busy("429")
            return {"url": ctx.payload["url"]}

        retry = RetryPolicy(retry_on=(Busy,), backoff=constant(30))
        self.registry.register(
            JobType(
                "crawl",
                crawl,
                on_cancel=self.cancelled.append,
                on_fail=self.failed.append,
                retry=RetryPolicy(retry_on=(JobTimeout,)),
            )
        )
        self.registry.register(JobType("fan_out", fan_out))
        self.registry.register(JobType("fetch", fetch, retry=retry, max_attempts=5))
        self.enqueue_fetch: Any = None


@pytest.fixture
def module() -> Module:
    return Module()


@pytest.fixture
def jobs_registry(module: Module) -> Registry:
    """The fixture a module author overrides: its registry."""
    return module.registry


@pytest.fixture
def harness(jobs_harness: JobsHarness, module: Module) -> JobsHarness:
    module.enqueue_fetch = lambda url: jobs_harness.enqueue("fetch", {"url": url, "depth": 1})
    return jobs_harness


def test_the_plugin_offers_a_harness_on_a_fake_clock_and_the_overridden_registry(
    jobs_harness: JobsHarness, jobs_clock: FakeClock, module: Module
) -> None:
    assert jobs_harness.registry is module.registry
    assert jobs_harness.clock is jobs_clock
    assert jobs_harness.run_next() is None


def test_run_next_uses_the_real_runner_and_assertions_find_what_was_enqueued(
    harness: JobsHarness,
) -> None:
    harness.enqueue("fan_out", {"urls": ["https://a.example/", "https://b.example/"]})
    ran = harness.run_next("fan_out")
    assert ran is not None
    assert ran.status is Status.DONE
    fetch = harness.assert_enqueued("fetch", {"url": "https://b.example/"}, status=Status.QUEUED)
    assert fetch.payload == {"url": "https://b.example/", "depth": 1}
    harness.assert_enqueued("fetch", {"depth": 1}, count=2)
    harness.assert_not_enqueued("fetch", {"url": "https://c.example/"})
    with pytest.raises(AssertionError, match=r"expected 3 job\(s\) of type 'fetch'.*found 2"):
        harness.assert_enqueued("fetch", count=3)
    with pytest.raises(AssertionError, match="expected no job of type 'fetch'"):
        harness.assert_not_enqueued("fetch")
    assert [job.report for job in harness.drain()] == [
        {"url": "https://a.example/"},
        {"url": "https://b.example/"},
    ]
    assert payload_matches({"a": 1, "b": 2}, {"a": 1})
    assert not payload_matches({"a": 1}, {"a": 1, "b": 2})


def test_drain_follows_the_backoff_of_a_retry_on_the_fake_clock(
    harness: JobsHarness, module: Module
) -> None:
    module.busy_left = 2
    start = harness.now()
    job = harness.enqueue("fetch", {"url": "u"})
    ran = harness.drain()
    assert [j.status for j in ran] == [Status.QUEUED, Status.QUEUED, Status.DONE]
    assert ran[-1].attempts == 3
    assert (harness.now() - start).total_seconds() == 60  # two backoffs of 30 s
    assert harness.store.get(job.org_id, job.id) == ran[-1]


def test_the_progress_throttle_follows_the_harness_clock(jobs_harness: JobsHarness) -> None:
    written: list[bool] = []

    def steps(ctx: JobContext) -> None:
        for _ in range(3):
            written.append(ctx.report_progress(1, 3))
            jobs_harness.advance(0.5)

    jobs_harness.registry.register(JobType("steps", steps))
    jobs_harness.enqueue("steps")
    jobs_harness.run_next()
    assert written == [True, False, True]


def test_the_sweep_requeues_a_job_whose_worker_went_silent(harness: JobsHarness) -> None:
    job = harness.enqueue("fetch", {"url": "u"})
    claimed = harness.claim()
    assert claimed is not None
    harness.advance(601)
    assert [j.id for j in harness.sweep(600).requeued] == [job.id]
    ran = harness.run_next()
    assert ran is not None
    assert ran.status is Status.DONE
    assert ran.attempts == 2


def test_a_requested_cancellation_ends_the_job_cancelled_and_runs_on_cancel(
    harness: JobsHarness, module: Module
) -> None:
    job = harness.enqueue("crawl", {"pages": 5})
    ran = harness.run_next(cancel=CancelReason.REQUESTED, at_progress=2)
    assert ran is not None
    assert ran.status is Status.CANCELLED
    assert module.stopped == [CancelReason.REQUESTED]
    assert [j.id for j in module.cancelled] == [job.id]
    assert harness.checkpoint_of(job) == {"next": 2}


def test_a_queued_job_cancelled_gets_its_on_cancel_at_the_next_hook_pass(
    harness: JobsHarness, module: Module
) -> None:
    job = harness.enqueue("crawl", {"pages": 1})
    harness.cancel(job)
    assert module.cancelled == []
    assert harness.run_end_hooks() == 1
    assert [j.status for j in module.cancelled] == [Status.CANCELLED]


def test_a_simulated_timeout_fails_the_attempt_as_a_timeout(
    harness: JobsHarness, module: Module
) -> None:
    harness.enqueue("crawl", {"pages": 5})
    ran = harness.run_next(cancel=CancelReason.TIMEOUT, at_progress=1)
    assert ran is not None
    assert module.stopped == [CancelReason.TIMEOUT]
    assert ran.status is Status.QUEUED  # the type declares JobTimeout retryable
    assert ran.error is not None
    assert ran.error.startswith("JobTimeout: timed out")
    resumed = harness.drain()
    assert resumed[-1].status is Status.DONE
    assert resumed[-1].progress is not None
    assert resumed[-1].progress["done"] == 5


def test_a_shutdown_hands_the_job_back_with_its_attempt_refunded(
    harness: JobsHarness, module: Module
) -> None:
    job = harness.enqueue("crawl", {"pages": 5})
    ran = harness.run_next(cancel=CancelReason.SHUTDOWN, at_progress=3)
    assert ran is not None
    assert module.stopped == [CancelReason.SHUTDOWN]
    assert ran.status is Status.QUEUED
    assert ran.attempts == 0
    assert harness.checkpoint_of(job) == {"next": 3}
    again = harness.run_next()
    assert again is not None
    assert again.status is Status.DONE
    assert again.attempts == 1


def test_a_lost_lease_refuses_the_handlers_later_writes(
    harness: JobsHarness, module: Module
) -> None:
    job = harness.enqueue("crawl", {"pages": 5})
    ran = harness.run_next(cancel=CancelReason.LEASE_LOST, at_progress=1)
    assert ran is not None
    assert module.stopped == [CancelReason.LEASE_LOST]
    assert ran.status is Status.QUEUED  # re-queued by the sweep, the outcome refused
    assert ran.attempts == 1
    assert harness.last_recorded is None  # the attempt's outcome was refused
    assert harness.checkpoint_of(job) == {"next": 1}  # the write after the loss was refused
    done = harness.drain()[-1]
    assert done.status is Status.DONE
    assert done.attempts == 2


def test_a_harness_runs_on_another_service_and_refuses_mixed_arguments() -> None:
    base = JobsHarness()
    other = JobsHarness(service=base.service, org="org-x")
    other.registry.register(JobType("noop", lambda ctx: None))
    job = other.enqueue("noop")
    assert job.org_id == "org-x"
    assert [j.id for j in base.jobs("noop")] == [job.id]
    with pytest.raises(ValueError, match="either a service or its parts"):
        JobsHarness(Registry("x"), service=base.service)


def test_the_harness_claims_under_the_types_limits_as_the_stores_do() -> None:
    """Three fetches of one site, two at most running per site: a third claim finds nothing
    until one ends (issue 25: the kit claimed all three, where PostgreSQL allows two)."""
    kit = JobsHarness()
    kit.registry.register(
        JobType("polite_fetch", lambda ctx: None, concurrency_key="site", concurrency_limit=2)
    )
    for _ in range(3):
        kit.enqueue("polite_fetch", {"site": "example.com"})
    first, second = kit.claim("polite_fetch"), kit.claim()
    assert first is not None
    assert second is not None
    assert kit.claim() is None  # the site's two places are taken
    kit.run(first)
    third = kit.claim("polite_fetch")
    assert third is not None
    assert third.status is Status.RUNNING
