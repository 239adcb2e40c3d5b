"""Running one claimed job: call its handler, turn what happened into an :class:`Outcome`.

The worker deployable owns slots, threads and signals; this module owns the rules: an uncaught
exception is a definitive failure (docs/contract.md §2), a declared-retryable one re-queues with
backoff while attempts remain, a timeout fails the attempt, a cancellation ends the job
``cancelled``.

Timeouts hold for every handler (docs/worker.md, "Timeouts"): a sync handler with a timeout and
every async handler run on a thread of their own (an async one on its own event loop there), and
the caller stops waiting at the timeout even if the handler never yields. The handler's code may
still run after that (Python cannot kill a thread): ``on_overrun`` is then given its thread, so
the worker can keep the slot counted as busy until that code really stops.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import traceback
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from jobs_core.context import JobContext
from jobs_core.domain import Cancelled, CancelReason, Done, Failed, Job, Outcome, Requeue, Status
from jobs_core.errors import JobCancelled, JobTimeout, Snooze
from jobs_core.limits import DOCUMENT_MAX_BYTES, describe_size, oversize
from jobs_core.registry import HandlerResult, JobType, Registry

log = logging.getLogger("jobs.runner")

ERROR_MAX_CHARS = 500
_TRACEBACK_MAX_CHARS = 8000
_CANCEL_POLL_S = 0.05
_ASYNC_TIMEOUT_SLACK_S = 0.1
"""An async handler's own loop enforces its timeout first (a clean task cancellation); the
caller stops waiting this much later, when that loop is blocked."""

Overrun = Callable[[threading.Thread], None]
"""Told the thread of a handler that is still running after its attempt timed out."""


def execute(
    job_type: JobType,
    ctx: JobContext,
    now: datetime | Callable[[], datetime],
    *,
    on_overrun: Overrun | None = None,
) -> Outcome:
    """Run the handler of ``ctx.job`` and return the outcome of this attempt.

    ``now`` may be a clock's ``now`` method: it is then read after the handler returns, so the
    backoff of a retryable error counts from the end of the attempt, not from its start.
    ``on_overrun(thread)`` is called, before the timeout's outcome is returned, when the handler
    did not stop at its timeout (its context is cancelled; the thread may still run).
    """
    try:
        result = _call(job_type, ctx, on_overrun)
    except JobCancelled as cancelled:
        return Cancelled(report={"reason": str(cancelled) or ctx.cancel_message})
    except Snooze as snooze:
        return snooze_outcome(job_type, ctx.job, snooze, now() if callable(now) else now)
    except Exception as error:
        ended = now() if callable(now) else now
        outcome = failure_outcome(job_type, ctx.job, error, ended)
        if isinstance(outcome, Requeue) and ctx.cancelled and not isinstance(error, JobTimeout):
            # a retry would run a job somebody asked to stop
            return Cancelled(report={"reason": ctx.cancel_message, "error": outcome.error})
        return outcome
    if result is not None and not isinstance(result, Mapping):
        return Failed(
            error=f"handler returned {type(result).__name__}, expected a mapping or None",
            report={"exception_type": "TypeError"},
        )
    report = dict(result) if result is not None else None
    size = oversize(report)
    if size is not None:
        return Failed(
            error=(
                f"the handler's report is over {describe_size(size - 1)} of JSON, more than the"
                f" {describe_size(DOCUMENT_MAX_BYTES)} a job may hold: keep large results out of"
                " the job (store them elsewhere, report a reference)"
            ),
            report={
                "exception_type": "DocumentTooLarge",
                "report_bytes_over": size - 1,
                "limit_bytes": DOCUMENT_MAX_BYTES,
            },
        )
    return Done(report=report)


def failure_outcome(job_type: JobType, job: Job, error: BaseException, now: datetime) -> Outcome:
    """Requeue with backoff if ``error`` is declared retryable and attempts remain, else fail."""
    short = short_error(error)
    report = {
        "exception_type": type(error).__qualname__,
        "message": str(error)[:_TRACEBACK_MAX_CHARS],
        "traceback": "".join(traceback.format_exception(error))[-_TRACEBACK_MAX_CHARS:],
        "attempt": job.attempts,
    }
    if job_type.retry.is_retryable(error) and job.attempts < job.max_attempts:
        delay = job_type.retry.delay_after(job.attempts)
        report["retry_in_s"] = delay
        return Requeue(run_at=now + timedelta(seconds=delay), error=short, report=report)
    return Failed(error=short, report=report)


SNOOZED_TOO_OFTEN = "snoozed too often"


def snooze_outcome(job_type: JobType, job: Job, snooze: Snooze, now: datetime) -> Outcome:
    """Run again after the delay with the attempt handed back, while the type's
    ``max_snoozes`` allows; past it the job fails (it cannot loop for ever)."""
    if job.snoozes >= job_type.max_snoozes:
        return Failed(
            error=f"{SNOOZED_TOO_OFTEN} ({job.snoozes} times; max_snoozes={job_type.max_snoozes})",
            report={"reason": snooze.reason or str(snooze), "snoozes": job.snoozes},
        )
    return Requeue(
        run_at=now + timedelta(seconds=snooze.delay_s),
        error=None,
        report={"snoozed": snooze.reason or str(snooze), "snooze_s": snooze.delay_s},
        snooze=True,
    )


def short_error(error: BaseException) -> str:
    """A one-line message for the ``error`` column."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    message = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return message[:ERROR_MAX_CHARS]


def _call(job_type: JobType, ctx: JobContext, on_overrun: Overrun | None) -> HandlerResult:
    if inspect.iscoroutinefunction(job_type.handler):
        return _call_async(job_type, ctx, on_overrun)
    if job_type.timeout_s is None or getattr(job_type.handler, "enforces_timeout", False):
        # a handler that enforces the timeout itself (a child process it can kill)
        return _expect_sync(job_type.handler(ctx))
    return _expect_sync(
        _in_thread(lambda: job_type.handler(ctx), ctx, job_type.timeout_s, 0.0, on_overrun)
    )


def _expect_sync(result: object) -> HandlerResult:
    if inspect.isawaitable(result):
        raise TypeError("a sync handler returned an awaitable; declare it `async def`")
    return cast(HandlerResult, result)


def _in_thread(
    call: Callable[[], object],
    ctx: JobContext,
    timeout: float | None,
    slack: float,
    on_overrun: Overrun | None,
) -> object:
    """``call()`` on a thread of its own; stop waiting ``timeout + slack`` seconds later.

    Python cannot kill a thread: on timeout the context is cancelled (a cooperative handler stops
    at its next check), ``on_overrun`` gets the thread, and the attempt is failed now. Handlers
    that may hang in native code belong in a subprocess.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as error:  # handed back to the calling thread
            box["error"] = error

    # Named after the calling thread (a worker's slot): it runs that slot's attempt, and the slot
    # stays busy while it runs.
    thread = threading.Thread(target=target, name=threading.current_thread().name, daemon=True)
    thread.start()
    thread.join(None if timeout is None else timeout + slack)
    if thread.is_alive():
        assert timeout is not None
        ctx.cancel(CancelReason.TIMEOUT, f"timed out after {timeout:g} s")
        if on_overrun is not None:
            on_overrun(thread)
        raise JobTimeout(f"timed out after {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _call_async(job_type: JobType, ctx: JobContext, on_overrun: Overrun | None) -> HandlerResult:
    """The handler on an event loop of its own, on a thread of its own: a handler that blocks
    its loop (never awaits) cannot hide from its timeout, the caller's wait ends anyway."""

    def run() -> HandlerResult:
        coroutine = cast(Awaitable[HandlerResult], job_type.handler(ctx))
        return asyncio.run(_supervise(coroutine, ctx, job_type.timeout_s))

    timeout = job_type.timeout_s
    return cast(HandlerResult, _in_thread(run, ctx, timeout, _ASYNC_TIMEOUT_SLACK_S, on_overrun))


async def _supervise(
    coroutine: Awaitable[HandlerResult], ctx: JobContext, timeout: float | None
) -> HandlerResult:
    """Await the handler; cancel its task on a cancellation request or at the timeout."""
    task = asyncio.ensure_future(coroutine)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while not task.done():
        wait_s = _CANCEL_POLL_S if deadline is None else min(_CANCEL_POLL_S, deadline - loop.time())
        await asyncio.wait([task], timeout=max(0.0, wait_s))
        if task.done():
            break
        if ctx.cancelled:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise JobCancelled(ctx.cancel_message or None)
        if deadline is not None and loop.time() >= deadline:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            ctx.cancel(CancelReason.TIMEOUT, f"timed out after {timeout:g} s")
            raise JobTimeout(f"timed out after {timeout:g} s")
    return task.result()


def call_on_fail(registry: Registry, job: Job) -> None:
    """Invoke the type's ``on_fail`` for a job that just became failed; log, never raise."""
    if job.status is not Status.FAILED:
        return
    if job.type not in registry:
        log.warning("on_fail skipped: type %s is not registered here (job %s)", job.type, job.id)
        return
    hook = registry.get(job.type).on_fail
    if hook is None:
        return
    try:
        hook(job)
    except Exception:
        log.exception("on_fail of %s raised for job %s (ignored)", job.type, job.id)
