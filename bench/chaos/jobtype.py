"""The chaos job type, loaded by real workers through
``JOBS_EXTRA_REGISTRIES=bench.chaos.jobtype:registry`` (the ordinary extension mechanism).

A job's payload says what each of its attempts does: ``{"ms": 120, "plan": "ro"}`` sleeps 120 ms
(cooperatively: a cancellation or a lost lease stops it at once), then attempt 1 raises a
retryable error and attempt 2 succeeds. The plan letters (:data:`KINDS`):

- ``o`` ok: returns a report;
- ``r`` retry: raises :class:`ChaosRetryable`, which the type declares retryable;
- ``f`` fail: raises :class:`ChaosFailure`, not retryable (a definitive failure);
- ``x`` raise: a bug: a ``KeyError`` from deep inside the handler;
- ``b`` bad return: returns a list instead of a mapping (failed by the runner, nothing raised).

An attempt beyond the plan succeeds. Since what an attempt does depends only on its number, the
checker knows what the final status of every job may be.

Every execution writes two rows in ``chaos_executions`` (:data:`RECORDER_DDL`): ``start`` before
it does anything and ``end`` when the handler's code is over, each with the handler's own clock
(all processes run on one machine), the attempt and the worker's pid. The rows go through a
connection of their own, straight to the server (``CHAOS_RECORDER_URL``, never the blackholed
proxy), retried until written: the recorder is the witness, it must not be what fails.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import psycopg
from jobs_core import JobContext, JobType, Registry, RetryPolicy
from jobs_core.retry import constant

TYPE_NAME = "chaos.step"
"""The job type of the suite."""

MAX_ATTEMPTS = 5
"""Attempts of a chaos job: a long job may be killed more than once and still succeed."""

RETRY_DELAY_S = 0.3
"""Backoff before the next attempt after a retryable error (short: the run has to end)."""

RECORDER_URL_ENV = "CHAOS_RECORDER_URL"
"""Where a worker's handlers write their execution rows (a libpq URL, straight to the server)."""

RECORDER_APP = "chaos-recorder"
"""``application_name`` of the recorder's connections: the backend-killing fault spares them."""

RECORDER_GIVE_UP_S = 300.0
"""A recorder write is retried this long through outages, then the handler raises."""

KINDS = {
    "o": "ok",
    "r": "retry",
    "f": "fail",
    "x": "raise",
    "b": "bad_return",
}
"""Plan letter → what the attempt does, as its ``end`` row names it."""

RECORDER_DDL = """
CREATE TABLE IF NOT EXISTS chaos_executions (
    exec_id    uuid             NOT NULL,
    kind       text             NOT NULL CHECK (kind IN ('start', 'end')),
    job_id     uuid             NOT NULL,
    attempt    integer          NOT NULL,
    pid        integer          NOT NULL,
    at         double precision NOT NULL,  -- unix time, the handler's clock
    planned_ms integer          NOT NULL,
    outcome    text             NOT NULL,  -- start: what the plan says; end: what happened
    PRIMARY KEY (exec_id, kind)
)
"""


class ChaosRetryable(Exception):
    """A transient failure the chaos type declares retryable."""


class ChaosFailure(Exception):
    """A definitive failure planned for this attempt."""


def planned_kind(plan: str, attempt: int) -> str:
    """What attempt number ``attempt`` (1-based) of a job with ``plan`` does (a KINDS value)."""
    letter = plan[attempt - 1] if 1 <= attempt <= len(plan) else "o"
    return KINDS[letter]


class Recorder:
    """Writes execution rows on one autocommit connection per thread, retried until written.

    ``INSERT … ON CONFLICT DO NOTHING`` on ``(exec_id, kind)``: a row whose commit was acked too
    late (a terminated backend, a restart) is written again without a duplicate."""

    def __init__(self, url: str | None = None) -> None:
        self._url = url
        self._local = threading.local()

    def _connection(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            url = self._url or os.environ[RECORDER_URL_ENV]
            conn = psycopg.connect(
                url, autocommit=True, application_name=RECORDER_APP, connect_timeout=5
            )
            self._local.conn = conn
        return conn

    def write(
        self,
        exec_id: uuid.UUID,
        kind: str,
        ctx: JobContext,
        *,
        at: float,
        planned_ms: int,
        outcome: str,
    ) -> None:
        """Insert one row; through an outage, retry with backoff for up to
        :data:`RECORDER_GIVE_UP_S` seconds."""
        deadline = time.monotonic() + RECORDER_GIVE_UP_S
        delay = 0.05
        while True:
            try:
                self._connection().execute(
                    "INSERT INTO chaos_executions "
                    "(exec_id, kind, job_id, attempt, pid, at, planned_ms, outcome) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (exec_id, kind, ctx.job.id, ctx.attempt, os.getpid(), at, planned_ms, outcome),
                )
                return
            except (psycopg.OperationalError, psycopg.InterfaceError):
                conn = getattr(self._local, "conn", None)
                if conn is not None:
                    conn.close()
                self._local.conn = None
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(1.0, delay * 2)


recorder = Recorder()


def step(ctx: JobContext) -> Mapping[str, Any] | list[Any] | None:
    """Record the start, sleep ``ms`` cooperatively, do what the plan says for this attempt,
    record the end (whatever happened, cancellation and unexpected errors included)."""
    planned_ms = int(ctx.payload["ms"])
    kind = planned_kind(str(ctx.payload["plan"]), ctx.attempt)
    exec_id = uuid.uuid4()
    recorder.write(exec_id, "start", ctx, at=time.time(), planned_ms=planned_ms, outcome=kind)
    ended = "error"
    try:
        deadline = time.monotonic() + planned_ms / 1000
        while (remaining := deadline - time.monotonic()) > 0:
            if ctx.wait_cancelled(min(remaining, 0.25)):
                break
            ctx.report_progress(done=planned_ms - max(0.0, remaining * 1000), total=planned_ms)
        if ctx.cancelled:
            ended = "cancelled"
            ctx.raise_if_cancelled()
        ended = kind
        if kind == "retry":
            raise ChaosRetryable(f"planned transient failure (attempt {ctx.attempt})")
        if kind == "fail":
            raise ChaosFailure(f"planned failure (attempt {ctx.attempt})")
        if kind == "raise":
            return _buggy_lookup(ctx.payload)
        if kind == "bad_return":
            return ["not", "a", "mapping"]
        return {"slept_ms": planned_ms, "pid": os.getpid(), "attempt": ctx.attempt}
    finally:
        recorder.write(exec_id, "end", ctx, at=time.time(), planned_ms=planned_ms, outcome=ended)


def _buggy_lookup(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    settings: dict[str, Any] = dict(payload)
    return {"value": settings["chaos-missing-key"]}  # KeyError: the planned bug


registry = Registry("chaos")
"""The chaos type, for ``JOBS_EXTRA_REGISTRIES=bench.chaos.jobtype:registry``."""

registry.register(
    JobType(
        TYPE_NAME,
        step,  # type: ignore[arg-type]  # returns a list on purpose (plan letter "b")
        max_attempts=MAX_ATTEMPTS,
        retry=RetryPolicy(retry_on=(ChaosRetryable,), backoff=constant(RETRY_DELAY_S)),
        description="Chaos suite: sleeps, then does what its plan says for this attempt.",
    )
)
