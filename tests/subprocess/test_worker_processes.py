"""Real worker processes on a real PostgreSQL: a worker killed with SIGKILL takes its children
(and their children) with it; a handler that segfaults in an isolated child fails its job and
the worker goes on; an isolated handler keeps its JobContext (progress, checkpoint, cancel)."""

from __future__ import annotations

import os
import signal
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, Status, SystemClock
from jobs_worker.demo import registry as demo_registry
from jobs_worker.manifests import load_manifests
from jobs_worker.registries import compose

from tests.subprocess import crash_registry
from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


PACE = {
    "JOBS_HEARTBEAT_S": "0.3",
    "JOBS_SWEEP_INTERVAL_S": "0.5",
    "JOBS_SWEEP_THRESHOLD_S": "2",
    "JOBS_POLL_INTERVAL_S": "0.5",
    "JOBS_CANCEL_CHECK_S": "0.2",
    "JOBS_SHUTDOWN_GRACE_S": "20",
}


WRITER = """\
#!/bin/sh
# Writes a line every 50 ms, and so does a grandchild it starts in the background.
attempt=$(head -n 1 | sed -n 's/.*"attempt":\\([0-9]*\\),.*/\\1/p')
( while :; do echo grandchild >> "$OUT/grandchild-$attempt"; sleep 0.05; done ) &
echo $! > "$OUT/grandchild-pid-$attempt"
echo $$ > "$OUT/child-pid-$attempt"
while :; do echo child >> "$OUT/child-$attempt"; sleep 0.05; done
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


@pytest.fixture
def out() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="jobs-children-") as path:
        yield Path(path)


@pytest.fixture
def handlers(out: Path) -> Path:
    directory = out / "handlers" / "writer"
    directory.mkdir(parents=True)
    (directory / "manifest.yaml").write_text(
        textwrap.dedent(
            f"""\
            id: writer
            command: ./run.sh
            env: {{OUT: {out}}}
            max_attempts: 3
            """
        )
    )
    script = directory / "run.sh"
    script.write_text(WRITER)
    script.chmod(0o755)
    return directory.parent


@pytest.fixture
def spawn(out: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(url: str, **env: str) -> WorkerProcess:
        worker = WorkerProcess(url, out / f"worker-{len(started)}.log", env, PACE)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


@pytest.fixture
def service(pg_engine: Engine, handlers: Path) -> JobService:
    from jobs_postgres.store import PostgresJobStore

    registry = compose(
        [demo_registry, crash_registry.registry, load_manifests(handlers).registry], "tests"
    )
    return JobService(PostgresJobStore(pg_engine), registry, SystemClock())


def test_kill_9_of_the_worker_kills_its_child_and_grandchild_before_the_sweep(
    pg_url: str, service: JobService, spawn: Callable[..., WorkerProcess], out: Path, handlers: Path
) -> None:
    env = {"JOBS_HANDLERS_DIR": str(handlers)}
    job = service.enqueue(ORG, "writer", {}).job
    first = spawn(pg_url, **env)
    child_log, grandchild_log = out / "child-1", out / "grandchild-1"
    wait_until(lambda: size(child_log) > 40 and size(grandchild_log) > 40, 30, "the writers")
    child = int((out / "child-pid-1").read_text())
    grandchild = int((out / "grandchild-pid-1").read_text())
    assert alive(child)
    assert alive(grandchild)

    first.signal(signal.SIGKILL)
    assert first.wait_exit() == -signal.SIGKILL
    wait_until(lambda: not alive(child) and not alive(grandchild), 10, "the orphans to die")
    sizes = (size(child_log), size(grandchild_log))

    # A second worker sweeps the zombie and runs attempt 2; attempt 1 never writes again.
    second = spawn(pg_url, **env)
    wait_until(lambda: size(out / "child-2") > 40, 40, "the re-run after the sweep")
    assert job_of(service.store, job.id).attempts == 2
    assert (size(child_log), size(grandchild_log)) == sizes
    assert second.alive()


def test_a_segfault_in_an_isolated_handler_fails_the_job_and_the_worker_goes_on(
    pg_url: str, service: JobService, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(
        pg_url,
        JOBS_EXTRA_REGISTRIES="tests.subprocess.crash_registry:registry",
        JOBS_ISOLATED_TYPES="iso_segv,iso_pid",
    )
    worker.wait_started()
    crash = service.enqueue(ORG, "iso_segv", {}).job
    wait_until(lambda: job_of(service.store, crash.id).status.is_finished, 40, "the crash")
    after = service.enqueue(ORG, "iso_pid", {}).job
    wait_until(lambda: job_of(service.store, after.id).status.is_finished, 40, "the next job")

    failed = job_of(service.store, crash.id)
    assert failed.status is Status.FAILED
    assert failed.error is not None
    assert "killed by signal SIGSEGV" in failed.error
    assert failed.progress is not None
    assert failed.progress["stage"] == "about to crash"  # the JobContext's write crossed over
    assert worker.alive()
    done = job_of(service.store, after.id)
    assert done.status is Status.DONE
    assert done.report is not None
    assert done.report["pid"] not in (worker.pid, os.getpid())  # it ran in a child


def test_an_isolated_handler_resumes_from_its_checkpoint_and_can_be_cancelled(
    pg_url: str, service: JobService, spawn: Callable[..., WorkerProcess]
) -> None:
    worker = spawn(
        pg_url,
        JOBS_EXTRA_REGISTRIES="tests.subprocess.crash_registry:registry",
        JOBS_ISOLATED_TYPES="iso_resume,iso_patient",
        JOBS_CHILD_KILL_GRACE_S="10",
        JOBS_CONCURRENCY="2",
    )
    worker.wait_started()
    resumed = service.enqueue(ORG, "iso_resume", {}).job
    patient = service.enqueue(ORG, "iso_patient", {}).job
    wait_until(lambda: job_of(service.store, resumed.id).status.is_finished, 40, "the resume")
    done = job_of(service.store, resumed.id)
    assert done.status is Status.DONE, done.error
    assert done.report is not None
    assert done.report["resumed_from_row"] == 5
    assert done.report["attempt"] == 2

    def stepping() -> bool:
        progress = job_of(service.store, patient.id).progress
        return bool(progress and progress.get("done", 0) >= 3)

    wait_until(stepping, 40, "the patient job's progress")
    service.cancel(ORG, patient.id)
    wait_until(lambda: job_of(service.store, patient.id).status.is_finished, 30, "the cancel")
    assert job_of(service.store, patient.id).status is Status.CANCELLED
    assert worker.alive()


def test_a_worker_stopped_by_sigterm_stops_its_children_and_hands_their_jobs_back(
    pg_url: str, service: JobService, spawn: Callable[..., WorkerProcess], out: Path, handlers: Path
) -> None:
    worker = spawn(pg_url, JOBS_HANDLERS_DIR=str(handlers), JOBS_SHUTDOWN_GRACE_S="1")
    job = service.enqueue(ORG, "writer", {}).job
    wait_until(lambda: size(out / "child-1") > 40, 30, "the child to write")
    child = int((out / "child-pid-1").read_text())
    grandchild = int((out / "grandchild-pid-1").read_text())

    worker.signal(signal.SIGTERM)
    assert worker.wait_exit(60) == 0
    wait_until(lambda: not alive(child) and not alive(grandchild), 10, "the children to stop")
    handed_back = job_of(service.store, job.id)
    assert handed_back.status is Status.QUEUED
    assert handed_back.attempts == 0  # handed back: the attempt is not counted
    assert "event=job.handed_back" in worker.log()
