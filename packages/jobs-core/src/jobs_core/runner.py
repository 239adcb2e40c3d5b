"""Running one claimed job: call its handler, turn what happened into an :class:`Outcome`.

The worker deployable owns slots, threads and signals; this module owns the rules, all of them
in one place: an uncaught exception is a definitive failure (docs/contract.md §2), a
declared-retryable one re-queues with backoff while attempts remain, a timeout fails the attempt,
a cancellation ends the job ``cancelled``, an unknown type or a ``SystemExit`` from a handler
fails it (:func:`run_attempt`), a handler stopped by the worker's lease fence goes back to the
queue (:func:`fenced_outcome`), an outcome the store refuses becomes a short failure
(:func:`unrecordable_outcome`).

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
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from jobs_core.context import JobContext
from jobs_core.domain import (
    Cancelled,
    CancelReason,
    Done,
    Failed,
    Job,
    Outcome,
    Requeue,
    Status,
    Wait,
)
from jobs_core.errors import JobCancelled, JobTimeout, Snooze, UnknownJobType, WaitForChildren
from jobs_core.limits import DOCUMENT_MAX_BYTES, describe_size, oversize
from jobs_core.registry import HandlerResult, JobType, Registry
from jobs_core.tracebacks import handler_traceback

log = logging.getLogger("jobs.runner")

ERROR_MAX_CHARS = 500
_TRACEBACK_MAX_CHARS = 8000
_CANCEL_POLL_S = 0.05
_ASYNC_TIMEOUT_SLACK_S = 0.1
"""An async handler's own loop enforces its timeout first (a clean task cancellation); the
caller stops waiting this much later, when that loop is blocked."""

Overrun = Callable[[threading.Thread], None]
"""Told the thread of a handler that is still running after its attempt timed out."""


def run_attempt(
    registry: Registry,
    ctx: JobContext,
    now: Callable[[], datetime],
    *,
    on_overrun: Overrun | None = None,
) -> Outcome:
    """:func:`execute` the handler of ``ctx.job``'s type, found in ``registry``; an unknown type,
    or whatever escapes the handler (``SystemExit`` or the like), fails the attempt. A context
    cancelled before the handler starts (a job claimed ahead of a free slot, then cancelled,
    fenced or found lost while it waited) ends the attempt cancelled without calling it."""
    if ctx.cancelled:
        return Cancelled(report={"reason": ctx.cancel_message})
    try:
        return execute(registry.get(ctx.job.type), ctx, now, on_overrun=on_overrun)
    except UnknownJobType as error:
        return Failed(error=str(error), report={"exception_type": "UnknownJobType"})
    except BaseException as error:  # SystemExit or the like from a handler: the job fails
        return Failed(error=short_error(error), report={"exception_type": type(error).__qualname__})


def fenced_outcome(
    outcome: Outcome, fenced: str | None, cancel_requested: bool, now: Callable[[], datetime]
) -> Outcome:
    """The outcome of an attempt whose handler the lease fence may have stopped (``fenced``: the
    fence's reason, docs/worker.md "The lease fence"). Cancelled by the fence and not by anyone's
    request: back to the queue, the attempt refunded (written if the link returns before the
    sweep takes the job). Otherwise ``outcome`` as it is."""
    if fenced and isinstance(outcome, Cancelled) and not cancel_requested:
        return Requeue(run_at=now(), error=fenced[:ERROR_MAX_CHARS], refund_attempt=True)
    return outcome


def unrecordable_outcome(error: BaseException) -> Failed:
    """The failure written instead of an outcome the store refused for a reason other than an
    outage (a report it cannot encode, say): a job never holds its slot because its outcome
    cannot be written (docs/worker.md, "Document sizes")."""
    return Failed(
        error=f"the job's outcome could not be recorded: {short_error(error)}"[:ERROR_MAX_CHARS],
        report={"exception_type": type(error).__qualname__},
    )


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
    except WaitForChildren as waiting:  # decision 0043
        return Wait(waiting.report, ctx.children, ctx.enqueued_children)
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
    return Done(report=report, children=ctx.children)


def failure_outcome(job_type: JobType, job: Job, error: BaseException, now: datetime) -> Outcome:
    """Requeue with backoff if ``error`` is declared retryable and attempts remain, else fail."""
    short = short_error(error)
    report = {
        "exception_type": type(error).__qualname__,
        "message": str(error)[:_TRACEBACK_MAX_CHARS],
        # The handler's frames only, paths relative to their package: a tenant reads this.
        "traceback": handler_traceback(error, _TRACEBACK_MAX_CHARS, job_type.handler),
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
