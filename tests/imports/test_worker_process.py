"""``import_csv`` in real worker processes (``python -m jobs_worker``) on PostgreSQL.

- kill -9 in the middle of an import, a new worker sweeps the zombie and resumes it: no row
  twice, and exactly the rows and figures of a clean run of the same file;
- a file that is not a CSV fails with a clear report while the worker stays alive and runs the
  next import.

Domain time is real here (the processes use the system clock), so the sweep threshold is two
seconds and every wait is bounded.

The file has 12,000 rows, 120 batches (40,000 before the suite was sized for five minutes: 14.3
-> 8.8 s on the embedded server): the kill comes once 10 batches are written, leaving most of
the file to the resume, with bad rows and repeats all through it; a kill that came too late
still fails the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import Job, Status
from jobs_imports.registry import build_module

from tests.imports.helpers import HEADER, ORG, job_of, rows_of, run_next, upload

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BATCH = 100
ROWS = 12_000

PACE = {
    "JOBS_HEARTBEAT_S": "0.3",
    "JOBS_SWEEP_INTERVAL_S": "0.5",
    "JOBS_SWEEP_THRESHOLD_S": "2",
    "JOBS_POLL_INTERVAL_S": "0.2",
    "JOBS_CANCEL_CHECK_S": "0.2",
    "JOBS_SHUTDOWN_GRACE_S": "5",
}


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Wait for a real event, bounded."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class WorkerProcess:
    """One ``python -m jobs_worker`` with its log file: it serves the Imports types with nothing
    to configure (the shipped modules are built by the worker), in small batches
    (``JOBS_IMPORTS_BATCH_SIZE``) so an import spans many transactions."""

    def __init__(self, url: str, data_dir: Path, log_path: Path) -> None:
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        env.update(
            {
                "JOBS_DATABASE_URL": url,
                "JOBS_DATA_DIR": str(data_dir),
                "JOBS_IMPORTS_BATCH_SIZE": str(BATCH),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
                **PACE,
            }
        )
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jobs_worker"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_started(self) -> None:
        wait_until(
            lambda: "worker.started" in self.log() or self.process.poll() is not None,
            60,
            "the worker to start",
        )
        assert self.process.poll() is None, f"the worker exited early:\n{self.log()}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill9(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory of this test's own (not the shared pytest tmp root, which concurrent
    sessions prune), holding the data directory and the workers' logs."""
    with tempfile.TemporaryDirectory(prefix="jobs-imports-worker-") as path:
        yield Path(path)


@pytest.fixture
def spawn(imports_url: str, workdir: Path) -> Iterator[Callable[[], WorkerProcess]]:
    """Start workers on the session database; any still running at the end is stopped."""
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        worker = WorkerProcess(imports_url, workdir / "data", workdir / f"w{len(started)}.log")
        started.append(worker)
        worker.wait_started()
        return worker

    yield start
    for worker in started:
        worker.close()


@pytest.fixture
def local(imports_engine: Engine, workdir: Path) -> ImportsModule:
    """The module in this process, on the workers' data directory."""
    (workdir / "data").mkdir()
    return build_module(imports_engine, workdir / "data", batch_size=BATCH)


def export(rows: int) -> bytes:
    """A search-console export with a few bad rows and repeats spread through it."""
    lines = [HEADER.rstrip("\n")]
    for i in range(rows):
        if i % 997 == 13:
            lines.append(f"https://www.example.com/p{i},q,lots,1,1%,1,2025-01-01")
        elif i % 1009 == 7:
            lines.append(lines[-1])
        else:
            lines.append(
                f"https://www.example.com/p{i % 500}/,query {i},{i % 50},{i % 900 + 50},"
                f"{(i % 50) / (i % 900 + 50) * 100:.2f}%,{1 + i % 30}.5,2025-01-{1 + i % 28:02d}"
            )
    return ("\n".join(lines) + "\n").encode()


def figures(module: ImportsModule, import_id: uuid.UUID) -> tuple[Any, ...]:
    view = module.service.get_import(ORG, import_id)
    report = dict(view.record.report or {})
    report.pop("reconcile_job_id", None)
    rows = [row[:2] + row[3:] for row in rows_of(module, import_id)]
    return view.status, report, rows


def progress_of(module: ImportsModule, job: Job) -> int:
    current = job_of(module, ORG, job.id).progress or {}
    done = current.get("done")
    return int(done) if isinstance(done, int) else 0


def test_kill_9_mid_import_then_resume_gives_the_rows_of_a_clean_run(
    local: ImportsModule, spawn: Callable[[], WorkerProcess]
) -> None:
    target = local.service.create_site_target(ORG, "Example", "https://www.example.com")
    content = export(ROWS)

    clean = upload(local, target, content, "clean.csv")
    finished = run_next(local, "import_csv")
    assert finished is not None
    assert finished.status is Status.DONE, finished.error
    expected = figures(local, clean.record.id)
    assert expected[1]["read"] == ROWS
    assert expected[1]["errors"] > 0
    assert expected[1]["skipped"] > 0

    first = spawn()
    view = upload(local, target, content, "crashed.csv", force=True)  # the same content
    job = view.job
    assert job is not None
    # let it write a few batches, then kill it hard in the middle of the file
    wait_until(lambda: progress_of(local, job) >= 10 * BATCH, 60, "the import to make progress")
    first.kill9()
    dead = job_of(local, ORG, job.id)
    assert dead.status is Status.RUNNING
    checkpoint = dict(dead.progress or {})["checkpoint"]
    assert 0 < checkpoint["records"] < ROWS, "killed too late to test a resume"
    # what the dead attempt committed is exactly what its checkpoint says
    assert len(rows_of(local, view.record.id)) == checkpoint["inserted"]

    second = spawn()  # its sweep takes the zombie back, then it resumes the import
    wait_until(
        lambda: job_of(local, ORG, job.id).status.is_finished, 120, "the resumed import to end"
    )
    resumed = job_of(local, ORG, job.id)
    assert resumed.status is Status.DONE, resumed.error
    assert resumed.attempts == 2
    assert figures(local, view.record.id) == expected
    assert second.alive()


def test_a_file_that_is_not_csv_fails_clearly_and_the_worker_goes_on(
    local: ImportsModule, spawn: Callable[[], WorkerProcess]
) -> None:
    worker = spawn()
    target = local.service.create_site_target(ORG, "Example B", "https://b.example.com")
    broken = upload(local, target, b"PK\x03\x04" + os.urandom(2048), "report.xlsx")
    good = upload(local, target, HEADER + "/a,q,1,10,10%,1,2025-01-01\n", "good.csv")
    assert broken.job is not None
    assert good.job is not None
    broken_job, good_job = broken.job, good.job
    wait_until(
        lambda: job_of(local, ORG, good_job.id).status.is_finished, 60, "both imports to end"
    )
    failed = job_of(local, ORG, broken_job.id)
    assert failed.status is Status.FAILED
    assert "Excel workbook (.xlsx)" in (failed.error or "")
    assert local.service.get_import(ORG, broken.record.id).status == "failed"
    assert job_of(local, ORG, good_job.id).status is Status.DONE
    assert local.service.get_import(ORG, good.record.id).record.rows_inserted == 1
    assert worker.alive()
