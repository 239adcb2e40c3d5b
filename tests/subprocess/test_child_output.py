"""A child's output is bounded (issue 23; docs/subprocess-protocol.md): a real worker process on
PostgreSQL runs manifest children that flood stderr and stdout, or write a protocol line far
past its limit. The worker's log keeps the head of stderr, the job's error its tail, the rest is
counted; an over-long protocol line fails the attempt at once and is never logged whole."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import Job, JobService, Status, SystemClock
from jobs_core.protocol import LOG_BYTES, TAIL_LINES
from jobs_worker.manifests import load_manifests

from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FLOOD_BYTES = 20_000_000
LOG_BOUND = LOG_BYTES + 256 * 1024
"""The worker's whole log for the test: its head of stderr and its own few lines."""

SCRIPTS = {
    # 20 MB of stderr lines, then a failure: the error keeps the last lines.
    "flood": f"yes 'a line of noise' | head -c {FLOOD_BYTES} >&2; echo last words >&2; exit 3",
    # 20 MB on stdout: far past the report's 1 MiB; counted, never kept.
    "stdout": f"yes '{{}}' | head -c {FLOOD_BYTES}; exit 0",
    # A checkpoint line of 20 MB (never ended): the attempt fails at once, not after the sleep.
    "checkpoint": (
        f"printf 'CHECKPOINT:{{\"a\": \"' >&2; head -c {FLOOD_BYTES} /dev/zero | tr '\\0' x >&2;"
        " sleep 120"
    ),
    # One text line of 20 MB, then a report: cut, skipped to its end, and the job is done.
    "longline": (
        f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' y >&2; echo >&2; echo after >&2;"
        " echo '{\"ok\": true}'"
    ),
}


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    for name, script in SCRIPTS.items():
        directory = tmp_path / "handlers" / name
        directory.mkdir(parents=True)
        manifest = f"id: {name}\ncommand: ./run.sh\nmax_attempts: 1\ntimeout_s: 300\n"
        (directory / "manifest.yaml").write_text(manifest)
        run = directory / "run.sh"
        run.write_text(textwrap.dedent(f"#!/bin/sh\n{script}\n"))
        run.chmod(0o755)
    return tmp_path / "handlers"


@pytest.fixture
def service(pg_engine: Engine, handlers: Path) -> JobService:
    from jobs_postgres.store import PostgresJobStore

    return JobService(PostgresJobStore(pg_engine), load_manifests(handlers).registry, SystemClock())


@pytest.fixture
def worker(pg_url: str, handlers: Path, tmp_path: Path) -> Iterator[WorkerProcess]:
    started = WorkerProcess(
        pg_url,
        tmp_path / "worker.log",
        {"JOBS_HANDLERS_DIR": str(handlers), "JOBS_CONCURRENCY": "4"},
    )
    started.wait_started()
    yield started
    started.close()


def run_all(service: JobService) -> dict[str, Job]:
    ids = {name: service.enqueue(ORG, name, {}).job.id for name in SCRIPTS}
    wait_until(
        lambda: all(job_of(service.store, i).status.is_finished for i in ids.values()),
        120,
        "every child to end",
    )
    return {name: job_of(service.store, job_id) for name, job_id in ids.items()}


def test_a_childs_output_is_capped_head_and_tail_kept_the_rest_counted(
    service: JobService, worker: WorkerProcess
) -> None:
    jobs = run_all(service)
    log = worker.log()
    assert len(log.encode()) < LOG_BOUND, f"the worker logged {len(log)} characters"
    assert not re.search("[xy]{1001}", log), "an over-long line reached the log whole"

    flood = jobs["flood"]
    assert flood.status is Status.FAILED
    assert flood.error is not None
    assert "exited with code 3" in flood.error
    assert flood.report is not None
    tail = str(flood.report["message"])
    assert "last words" in tail
    assert "earlier lines dropped" in tail
    assert tail.count("a line of noise") <= TAIL_LINES
    assert "more stderr lines of the child were not logged" in log

    stdout = jobs["stdout"]
    assert stdout.status is Status.FAILED
    assert stdout.error is not None
    assert f"the report on stdout is {FLOOD_BYTES} bytes" in stdout.error

    checkpoint = jobs["checkpoint"]
    assert checkpoint.status is Status.FAILED
    assert checkpoint.error is not None
    assert "CHECKPOINT: line of" in checkpoint.error
    assert "x" * 1001 not in str(checkpoint.report)

    longline = jobs["longline"]
    assert longline.status is Status.DONE, longline.error
    assert longline.report == {"ok": True}
    assert "bytes of over-long lines skipped" in log
