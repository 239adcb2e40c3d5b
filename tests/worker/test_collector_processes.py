"""A worker process collects garbage while it runs jobs, and never walks what its start-up
built (``jobs_worker.startup.over``): the entry points turn the collector off while the
process starts, and the worker, once built, freezes what exists and turns it back on. A worker
whose collector stayed off would grow with every reference cycle its jobs leave behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import JobService, Status, SystemClock

from tests.cli.helpers import clean_env
from tests.worker import collector_registry
from tests.worker.helpers import ORG, job_of, wait_until
from tests.worker.processes import ROOT, WorkerProcess

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REGISTRY = "tests.worker.collector_registry:registry"


@pytest.fixture
def service(pg_engine: Engine) -> JobService:
    from jobs_postgres.store import PostgresJobStore

    return JobService(PostgresJobStore(pg_engine), collector_registry.registry, SystemClock())


def _collector_of_the_worker(service: JobService) -> dict[str, object]:
    job_id = service.enqueue(ORG, "collector_state", {}).job.id
    wait_until(lambda: job_of(service.store, job_id).status is Status.DONE, 60, "the job to run")
    report = job_of(service.store, job_id).report
    assert report is not None
    return dict(report)


def test_python_m_jobs_worker_collects_with_its_start_up_frozen(
    pg_url: str, service: JobService, workdir: Path
) -> None:
    worker = WorkerProcess(pg_url, workdir / "worker.log", {"JOBS_EXTRA_REGISTRIES": REGISTRY})
    try:
        state = _collector_of_the_worker(service)
        assert state["enabled"] is True, worker.log()
        assert isinstance(state["frozen"], int)
        assert state["frozen"] > 10_000, state
        worker.signal(signal.SIGTERM)
        assert worker.wait_exit() == 0
    finally:
        worker.close()


def test_jobs_worker_collects_with_its_start_up_frozen(
    pg_url: str, service: JobService, workdir: Path
) -> None:
    env = clean_env(
        JOBS_DATABASE_URL=pg_url,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    with (workdir / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "jobs"), "worker", "--extra-registry", REGISTRY],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            state = _collector_of_the_worker(service)
            assert state["enabled"] is True
            assert isinstance(state["frozen"], int)
            assert state["frozen"] > 10_000, state
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
