"""The lease fence with real worker processes and a link that goes silent (issue 11, finding 1).

Worker A reaches PostgreSQL through a :class:`~tests.postgres.proxy.LinkProxy`; the handlers
record each execution's span through a direct connection (``fence_test_executions``). When A's
link is blackholed or frozen mid-job, A must stop its handler before the sweep of another worker
may take the job (zero overlapping executions), and run jobs again by itself once the link
returns. Before the fence, A's heartbeat just blocked: its handler ran on while worker B ran the
same job (the double run of the issue), and a frozen A started none of the jobs queued after.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_postgres.store import PostgresJobStore
from jobs_worker.registries import compose
from sqlalchemy import text

from tests.postgres.proxy import LinkProxy
from tests.worker import fence_registry
from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Threshold 4 s, margin 0.8 s: a handler whose lease was last proven at t is cancelled at
# t + 3.2 s, the process exits at t + 3.6 s if it has not stopped; the sweep may take the job
# at t + 4 s. Store calls are bounded by min(10, 4 - 0.8 - 0.5) = 2.7 s.
FENCE_PACE = {
    "JOBS_HEARTBEAT_S": "0.5",
    "JOBS_SWEEP_INTERVAL_S": "0.5",
    "JOBS_SWEEP_THRESHOLD_S": "4",
    "JOBS_LEASE_MARGIN_S": "0.8",
    "JOBS_EXTRA_REGISTRIES": "tests.worker.fence_registry:registry",
}


@pytest.fixture
def proxy(pg_url: str) -> Iterator[LinkProxy]:
    link = LinkProxy(pg_url)
    yield link
    link.close()


@pytest.fixture
def spawn(workdir: Path, pg_url: str) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(url: str, **env: str) -> WorkerProcess:
        worker = WorkerProcess(
            url,
            workdir / f"worker-{len(started)}.log",
            {**FENCE_PACE, "JOBS_TEST_RECORDER_URL": pg_url, **env},
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


@pytest.fixture
def service(pg_engine: Engine) -> JobService:
    with pg_engine.begin() as conn:
        conn.execute(text(fence_registry.RECORDER_DDL))
        conn.execute(text("TRUNCATE fence_test_executions"))
    registry = compose([fence_registry.registry], "fence-tests")
    return JobService(PostgresJobStore(pg_engine), registry, SystemClock())


def _executions(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT job_id, pid, started_at, ended_at, how FROM fence_test_executions"
                    " ORDER BY job_id, started_at"
                )
            ).all()
        )


def _overlaps(rows: list[Any]) -> list[tuple[Any, Any]]:
    """Pairs of executions of one job whose spans intersect (an open span never ends)."""
    found = []
    for i, first in enumerate(rows):
        for second in rows[i + 1 :]:
            if second.job_id != first.job_id:
                continue
            if first.ended_at is None or second.started_at < first.ended_at:
                found.append((first, second))
    return found


def _enqueue(service: JobService, type_name: str, payload: dict[str, Any] | None = None) -> Any:
    return service.enqueue(ORG, type_name, payload or {}).job


def test_a_blackholed_worker_stops_its_handler_before_another_worker_takes_the_job(
    service: JobService, pg_engine: Engine, pg_url: str, proxy: LinkProxy, spawn: Any
) -> None:
    a = spawn(proxy.url)
    a.wait_started()
    job = _enqueue(service, "overlap", {"seconds": 25, "retry_seconds": 1})
    wait_until(lambda: _executions(pg_engine), 30, "worker A to start the job")
    proxy.blackhole()
    b = spawn(pg_url)  # a healthy worker: its sweep takes the job once its lease has expired
    b.wait_started()
    try:
        wait_until(lambda: "event=job.fenced" in a.log(), 30, "worker A to fence itself")
    except AssertionError:
        raise AssertionError(f"A did not fence itself:\n{a.log()}") from None
    # The sweep (B's, after the threshold) re-queues the job and B runs it to the end.
    wait_until(lambda: job_of(service.store, job.id).status is Status.DONE, 60, "B to finish")
    rows = _executions(pg_engine)
    assert _overlaps(rows) == []
    assert [row.pid for row in rows] == [a.pid, b.pid]
    assert rows[0].how.startswith("cancelled: lease unproven")
    assert a.alive()  # a cooperative handler stopped in time: no need to exit

    # The link returns: A works again by itself (B stopped, so only A can run these).
    b.signal(signal.SIGTERM)
    assert b.wait_exit() == 0
    proxy.restore()
    quick = [_enqueue(service, "quick") for _ in range(5)]
    wait_until(
        lambda: all(job_of(service.store, q.id).status is Status.DONE for q in quick),
        60,
        "A to run jobs again after the link returned",
    )
    assert {row.pid for row in _executions(pg_engine) if row.job_id in {q.id for q in quick}} == {
        a.pid
    }
    assert a.alive()
    assert "event=worker.fence_lifted" in a.log()


def test_a_frozen_worker_fences_itself_and_runs_the_queue_when_the_link_returns(
    service: JobService, pg_engine: Engine, proxy: LinkProxy, spawn: Any
) -> None:
    """The issue's worker frozen for 60 s started 0 of 10 jobs and kept its job running until
    its sockets were reset. Frozen here for twice the threshold: it fences its handler, and
    when the link returns it hands the job back itself and runs it and the 10 queued jobs.
    The job's re-run lasts 1 s (``retry_seconds``): it is claimed before the 10, and at 30 s
    again it only held them back (the one slot busy) for 30 s more."""
    a = spawn(proxy.url)
    a.wait_started()
    job = _enqueue(service, "overlap", {"seconds": 30, "retry_seconds": 1})
    wait_until(lambda: _executions(pg_engine), 30, "worker A to start the job")
    proxy.freeze()
    queued = [_enqueue(service, "quick") for _ in range(10)]
    wait_until(lambda: "event=job.fenced" in a.log(), 30, "worker A to fence itself")
    wait_until(lambda: _executions(pg_engine)[0].ended_at is not None, 10, "the handler to stop")
    frozen_at = _executions(pg_engine)[0].ended_at
    time.sleep(4)  # the scenario itself: the link stays frozen past the sweep threshold
    assert a.alive()
    proxy.restore()

    wait_until(
        lambda: all(job_of(service.store, q.id).status is Status.DONE for q in queued),
        60,
        "A to run the 10 jobs queued while it was frozen",
    )
    rows = _executions(pg_engine)
    assert _overlaps(rows) == []
    assert {row.pid for row in rows} == {a.pid}
    assert a.alive()
    assert frozen_at is not None
    # The fenced job went back to the queue (its attempt refunded) and runs again.
    again = job_of(service.store, job.id)
    assert again.status in {Status.QUEUED, Status.RUNNING, Status.DONE}
    assert again.attempts <= 2


def test_a_handler_stuck_past_its_timeout_and_grace_makes_the_worker_exit_4(
    service: JobService, pg_engine: Engine, pg_url: str, spawn: Any
) -> None:
    """The slot stays busy while the stuck code runs; after JOBS_TIMEOUT_GRACE_S the worker
    hands its other job back (attempt refunded) and exits 4, for its supervisor to restart it."""
    worker = spawn(pg_url, JOBS_CONCURRENCY="2", JOBS_TIMEOUT_GRACE_S="2")
    worker.wait_started()
    other = _enqueue(service, "overlap", {"seconds": 120})
    wait_until(lambda: _executions(pg_engine), 30, "the other job to start")
    stuck = _enqueue(service, "stuck", {"seconds": 120})
    assert worker.wait_exit(60) == 4
    assert job_of(service.store, stuck.id).status is Status.FAILED
    handed_back = job_of(service.store, other.id)
    assert handed_back.status is Status.QUEUED
    assert handed_back.attempts == 0
    log = worker.log()
    assert "event=job.overrun" in log
    assert "event=worker.wedged" in log


def test_a_handler_writing_progress_when_the_link_goes_silent_stops_without_exit_5(
    service: JobService, pg_engine: Engine, pg_url: str, proxy: LinkProxy, spawn: Any
) -> None:
    """The chaos suite's finding: a progress write in flight when the link froze blocked the
    handler for up to the store timeout, longer than the fence's M/2, and every
    such blackhole ended in exit 5. The fenced handler must be released from its write, stop,
    and the worker run jobs again once the link returns."""
    # C = 7 s is less than the fence's window (T - M = 11 s) but far more than M/2 = 0.5 s:
    # the write in flight at the blackhole is aborted at about 7 s, the next one blocks from
    # then on and is still in flight when the fence fires (before the fix: exit 5).
    a = spawn(
        proxy.url,
        JOBS_CONCURRENCY="2",
        JOBS_SWEEP_THRESHOLD_S="12",
        JOBS_LEASE_MARGIN_S="1",
        JOBS_STORE_TIMEOUT_S="7",
    )
    a.wait_started()
    job = _enqueue(service, "progressing", {"seconds": 12, "retry_seconds": 1})
    wait_until(lambda: _executions(pg_engine), 30, "worker A to start the job")
    # Progress is being written: its document moves.
    wait_until(
        lambda: (job_of(service.store, job.id).progress or {}).get("done", 0) > 5,
        30,
        "the handler to write progress",
    )
    proxy.blackhole()
    try:
        wait_until(lambda: "event=job.fenced" in a.log(), 30, "worker A to fence itself")
        wait_until(
            lambda: _executions(pg_engine)[0].ended_at is not None, 10, "the handler to stop"
        )
    except AssertionError:
        raise AssertionError(f"A's handler did not stop:\n{a.log()}") from None
    time.sleep(1.5)  # past proven + T - M/2: the instant A would have exited with code 5
    assert a.alive(), f"A exited ({a.wait_exit(5)}):\n{a.log()}"
    assert "event=worker.fenced_exit" not in a.log()
    rows = _executions(pg_engine)
    assert rows[0].how.startswith("cancelled: lease unproven")

    proxy.restore()
    quick = [_enqueue(service, "quick") for _ in range(5)]
    wait_until(
        lambda: all(job_of(service.store, q.id).status is Status.DONE for q in quick),
        60,
        "A to run jobs again after the link returned",
    )
    wait_until(lambda: job_of(service.store, job.id).status is Status.DONE, 60, "the job to end")
    rows = _executions(pg_engine)
    assert _overlaps(rows) == []
    assert {row.pid for row in rows} == {a.pid}
    assert a.alive()
    assert "event=worker.fence_lifted" in a.log()
