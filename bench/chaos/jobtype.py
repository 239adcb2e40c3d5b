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
(all processes run on one machine), the attempt and the worker's pid. The :class:`Recorder`
journals them to a file at once and inserts them behind the handler's back on a connection of
its own, straight to the server (never the blackholed proxy): the witness must neither fail nor
hold the handler up.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
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

JOURNAL_DIR_ENV = "CHAOS_JOURNAL_DIR"
"""Where each worker process appends its witness rows, one JSON line each (``<pid>.jsonl``)."""

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
    """The witness of one worker process: a journal file written at once, a table filled behind.

    :meth:`write` appends the row as one JSON line to ``<CHAOS_JOURNAL_DIR>/<pid>.jsonl`` (one
    ``write`` system call on an ``O_APPEND`` file: it survives a ``kill -9`` the moment it
    returns, and it never waits for the database), then hands it to a thread that inserts it
    into ``chaos_executions`` over a connection of its own, straight to the server
    (``CHAOS_RECORDER_URL``), retrying through outages. So the table is live for the runner
    (the blackhole waits on it), and a handler never blocks on its witness: a handler stuck
    writing a row while the database restarts would be a handler the worker's lease fence
    cannot stop, which would be the witness changing what it observes. At the end the runner
    loads every journal into the table (``ON CONFLICT DO NOTHING`` on ``(exec_id, kind)``), so
    a row whose insert a kill interrupted is not lost either.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()

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
        """Journal one row now; insert it into the table soon."""
        row = (
            str(exec_id),
            kind,
            str(ctx.job.id),
            ctx.attempt,
            os.getpid(),
            at,
            planned_ms,
            outcome,
        )
        os.write(self._journal(), (json.dumps(row) + "\n").encode())
        self._queue.put(row)

    def _journal(self) -> int:
        with self._lock:
            if self._fd is None or self._pid != os.getpid():
                path = Path(os.environ[JOURNAL_DIR_ENV]) / f"{os.getpid()}.jsonl"
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                self._pid = os.getpid()
                threading.Thread(
                    target=self._insert_rows, name="chaos-recorder", daemon=True
                ).start()
            return self._fd

    def _insert_rows(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        batch: list[tuple[Any, ...]] = []
        delay = 0.05
        while True:
            if not batch:
                batch.append(self._queue.get())
            while len(batch) < 500:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(
                        os.environ[RECORDER_URL_ENV],
                        autocommit=True,
                        application_name=RECORDER_APP,
                        connect_timeout=5,
                    )
                with conn.cursor() as cursor:
                    cursor.executemany(INSERT_ROW, batch)
                batch, delay = [], 0.05
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(delay)
                delay = min(1.0, delay * 2)


INSERT_ROW = (
    "INSERT INTO chaos_executions (exec_id, kind, job_id, attempt, pid, at, planned_ms, outcome) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
"""One witness row (the journal's lines hold the same tuple)."""


def read_journals(directory: Path) -> tuple[list[tuple[Any, ...]], int]:
    """Every row of the journals in ``directory``, and how many lines could not be read."""
    rows: list[tuple[Any, ...]] = []
    unreadable = 0
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rows.append(tuple(json.loads(line)))
            except ValueError:
                unreadable += 1
    return rows, unreadable


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
