"""Running a handler: outcomes, async handlers, timeouts, cancellation, progress throttling."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from jobs_core import (
    Cancelled,
    CancelReason,
    Done,
    Failed,
    Job,
    JobCancelled,
    JobContext,
    JobTimeout,
    JobType,
    NewJob,
    Registry,
    Requeue,
    RetryPolicy,
    Status,
    domain,
    uuid7,
)
from jobs_core.runner import call_on_fail, execute, short_error

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def running_job(**changes: Any) -> Job:
    job = domain.new_job(NewJob(org_id="o", type="t", **changes), uuid7(), NOW)
    return domain.claim(job, uuid7(), NOW)


def context(job: Job | None = None, sink: list[Mapping[str, Any]] | None = None) -> JobContext:
    written = sink if sink is not None else []

    def write(document: Mapping[str, Any]) -> bool:
        written.append(document)
        return True

    return JobContext(job or running_job(), progress_sink=write, now=lambda: NOW)


def test_a_returned_mapping_is_the_report() -> None:
    outcome = execute(JobType("t", lambda ctx: {"rows": 3}), context(), NOW)
    assert outcome == Done({"rows": 3})
    assert execute(JobType("t", lambda ctx: None), context(), NOW) == Done(None)


def test_a_non_mapping_result_fails_the_attempt() -> None:
    outcome = execute(JobType("t", lambda ctx: 42), context(), NOW)  # type: ignore[arg-type,return-value]
    assert isinstance(outcome, Failed)
    assert "expected a mapping" in outcome.error


def test_async_handlers_run_on_an_event_loop_of_their_own() -> None:
    async def handler(ctx: JobContext) -> Mapping[str, Any]:
        await asyncio.sleep(0)
        return {"async": True}

    assert execute(JobType("t", handler), context(), NOW) == Done({"async": True})
    assert execute(JobType("t", handler), context(), NOW) == Done({"async": True})


def test_an_uncaught_exception_is_definitive_unless_declared_retryable() -> None:
    def broken(ctx: JobContext) -> None:
        raise KeyError("missing")

    failed = execute(JobType("t", broken), context(), NOW)
    assert isinstance(failed, Failed)
    assert failed.error == "KeyError: 'missing'"
    retrying = JobType("t", broken, retry=RetryPolicy(retry_on=(KeyError,)))
    requeue = execute(retrying, context(running_job(max_attempts=3)), NOW)
    assert isinstance(requeue, Requeue)
    assert (requeue.run_at - NOW).total_seconds() == 2.0
    at_cap = domain.claim(
        domain.finish(running_job(max_attempts=2), Requeue(run_at=NOW), NOW), uuid7(), NOW
    )
    assert isinstance(execute(retrying, context(at_cap), NOW), Failed)


def test_a_sync_handler_that_overruns_its_timeout_fails_as_a_timeout() -> None:
    released = threading.Event()

    def slow(ctx: JobContext) -> None:
        ctx.wait_cancelled(10)
        released.set()

    outcome = execute(JobType("t", slow, timeout_s=0.1), context(), NOW)
    assert isinstance(outcome, Failed)
    assert outcome.error.startswith("JobTimeout")
    assert released.wait(5), "the cooperative handler saw the cancellation"


def test_an_async_handler_is_cancelled_at_its_timeout() -> None:
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(30)

    started = time.monotonic()
    outcome = execute(JobType("t", slow, timeout_s=0.1), context(), NOW)
    assert isinstance(outcome, Failed)
    assert outcome.error.startswith("JobTimeout")
    assert time.monotonic() - started < 10


def test_a_timeout_may_be_declared_retryable() -> None:
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(30)

    job_type = JobType("t", slow, timeout_s=0.05, retry=RetryPolicy(retry_on=(JobTimeout,)))
    assert isinstance(execute(job_type, context(), NOW), Requeue)


def test_cancellation_ends_the_job_cancelled() -> None:
    def cooperative(ctx: JobContext) -> None:
        ctx.cancel(CancelReason.REQUESTED, "user asked")
        ctx.raise_if_cancelled()

    outcome = execute(JobType("t", cooperative), context(), NOW)
    assert outcome == Cancelled({"reason": "user asked"})

    async def waiting(ctx: JobContext) -> None:
        threading.Timer(0.05, ctx.cancel).start()
        await asyncio.sleep(30)

    assert isinstance(execute(JobType("t", waiting), context(), NOW), Cancelled)


def test_progress_is_throttled_unless_forced() -> None:
    written: list[Mapping[str, Any]] = []
    ticks = iter([0.0, 0.1, 0.2, 1.5, 1.6])

    def sink(document: Mapping[str, Any]) -> bool:
        written.append(document)
        return True

    ctx = JobContext(
        running_job(),
        progress_sink=sink,
        now=lambda: NOW,
        monotonic=lambda: next(ticks),
    )
    assert ctx.report_progress(1, 10)
    assert not ctx.report_progress(2, 10)
    assert ctx.report_progress(3, 10, force=True, cursor="c3")
    assert ctx.report_progress(4, 10)
    assert not ctx.report_progress(5, 10)
    assert [d["done"] for d in written] == [1, 3, 4]
    assert written[1] == {"cursor": "c3", "done": 3, "total": 10, "updated_at": NOW.isoformat()}


def test_a_lost_lease_cancels_the_attempt() -> None:
    ctx = JobContext(running_job(), progress_sink=lambda doc: False, now=lambda: NOW)
    assert not ctx.report_progress(1, 2)
    assert ctx.cancelled
    assert ctx.cancel_reason is CancelReason.LEASE_LOST
    assert "lease lost" in ctx.cancel_message
    with pytest.raises(JobCancelled):
        ctx.raise_if_cancelled()


def test_an_unsaved_write_neither_cancels_nor_counts_for_the_throttle() -> None:
    answers = iter([None, True])
    ctx = JobContext(
        running_job(),
        progress_sink=lambda doc: next(answers),
        now=lambda: NOW,
        monotonic=lambda: 5.0,
    )
    assert not ctx.report_progress(1, 2, force=True)  # the store was unreachable
    assert not ctx.cancelled
    assert ctx.cancel_reason is None
    assert ctx.report_progress(1, 2)  # not throttled by the write that did not happen


def test_the_first_cancellation_reason_is_kept_with_its_default_message() -> None:
    ctx = JobContext(running_job(), progress_sink=lambda doc: True, now=lambda: NOW)
    assert ctx.cancel_message == ""
    ctx.cancel(CancelReason.SHUTDOWN)
    ctx.cancel(CancelReason.REQUESTED, "too late")
    assert ctx.cancel_reason is CancelReason.SHUTDOWN
    name: str = ctx.cancel_reason
    assert name == "shutdown"  # a StrEnum: its value is its public name
    assert ctx.cancel_message == "the worker shut down before the job finished"
    assert {reason.value for reason in CancelReason} == {
        "requested",
        "timeout",
        "shutdown",
        "lease_lost",
    }


def test_a_timeout_cancels_the_context_with_the_timeout_reason() -> None:
    seen: list[CancelReason | None] = []

    def slow(ctx: JobContext) -> None:
        ctx.wait_cancelled(30)
        seen.append(ctx.cancel_reason)

    ctx = context()
    assert isinstance(execute(JobType("t", slow, timeout_s=0.05), ctx, NOW), Failed)
    assert ctx.cancel_reason is CancelReason.TIMEOUT
    assert ctx.cancel_message == "timed out after 0.05 s"


def test_on_fail_errors_are_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry()
    seen: list[Job] = []

    def hook(job: Job) -> None:
        seen.append(job)
        raise RuntimeError("module bug")

    registry.register(JobType("t", lambda ctx: None, on_fail=hook))
    failed = domain.finish(running_job(), Failed("x"), NOW)
    call_on_fail(registry, failed)
    assert seen == [failed]
    assert "on_fail of t raised" in caplog.text
    done = domain.finish(running_job(), Done(), NOW)
    call_on_fail(registry, done)
    assert seen == [failed]
    assert failed.status is Status.FAILED


def test_short_error_is_one_bounded_line() -> None:
    assert short_error(ValueError("a\nb")) == "ValueError: a"
    assert short_error(RuntimeError()) == "RuntimeError"
    assert len(short_error(ValueError("x" * 5000))) == 500


def test_a_retryable_error_after_a_cancellation_request_cancels_instead() -> None:
    def flaky(ctx: JobContext) -> None:
        ctx.cancel(CancelReason.REQUESTED, "user asked")
        raise TimeoutError("upstream slow")

    job_type = JobType("t", flaky, retry=RetryPolicy(retry_on=(TimeoutError,)))
    outcome = execute(job_type, context(running_job(max_attempts=3)), NOW)
    assert isinstance(outcome, Cancelled)


def test_a_report_over_the_size_limit_fails_the_attempt_with_a_clear_error() -> None:
    from jobs_core import DocumentTooLarge
    from jobs_core.limits import DOCUMENT_MAX_BYTES, oversize

    job_type = JobType("big", lambda ctx: {"blob": "x" * (2 * DOCUMENT_MAX_BYTES)})
    ctx = context()
    outcome = execute(job_type, ctx, NOW)
    assert isinstance(outcome, Failed)
    assert "more than the 1.0 MiB a job may hold" in outcome.error
    assert len(outcome.error) < 300
    assert outcome.report is not None
    assert outcome.report["exception_type"] == "DocumentTooLarge"
    assert oversize({"a": "x" * 100}) is None
    with pytest.raises(DocumentTooLarge, match="progress document over"):
        ctx.report_progress(1, 2, force=True, rows=["y" * 1000] * 2000)


def test_an_async_handler_that_never_awaits_still_fails_at_its_timeout() -> None:
    """Issue 11: it used to block its slot's loop and end ``done`` 20 s past a 3 s timeout.
    Its own loop on its own thread: the caller's wait ends at the timeout, and is told the
    thread still runs (the worker keeps the slot busy until it stops)."""
    release = threading.Event()

    async def blocking(ctx: JobContext) -> Mapping[str, Any]:
        release.wait(30)  # never yields to the event loop
        return {"finished": True}

    overruns: list[threading.Thread] = []
    started = time.monotonic()
    outcome = execute(
        JobType("t", blocking, timeout_s=0.2), context(), NOW, on_overrun=overruns.append
    )
    assert time.monotonic() - started < 5
    assert isinstance(outcome, Failed)
    assert outcome.error.startswith("JobTimeout: timed out after 0.2 s")
    [thread] = overruns
    assert thread.is_alive()
    release.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_sync_handler_that_ignores_its_timeout_is_reported_as_overrunning() -> None:
    release = threading.Event()

    def stubborn(ctx: JobContext) -> None:
        release.wait(30)  # never looks at its cancellation

    overruns: list[threading.Thread] = []
    outcome = execute(
        JobType("t", stubborn, timeout_s=0.1), context(), NOW, on_overrun=overruns.append
    )
    assert isinstance(outcome, Failed)
    assert [t.is_alive() for t in overruns] == [True]
    release.set()
    overruns[0].join(5)
    # A handler that stops in time is no overrun.
    again: list[threading.Thread] = []
    quick = JobType("t", lambda ctx: {"ok": 1}, timeout_s=5)
    assert execute(quick, context(), NOW, on_overrun=again.append) == Done({"ok": 1})
    assert again == []
