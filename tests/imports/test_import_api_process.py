"""``import_api`` in real worker processes (``python -m jobs_worker``) against the fake source:
a worker killed with ``kill -9`` in the middle of an import, then a new worker resumes it at the
cursor of the last committed page — exactly the rows and figures of a clean run, no page before
it fetched again, and the site target's consistent set unchanged.

Domain time is real here (the processes use the system clock): the sweep threshold is two seconds
and every wait is bounded and waits for an event (a request reaching the source, a job ending).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobs_core import Status
from jobs_imports.api_sources import ApiSources
from jobs_imports.registry import build_module

from tests.imports.api_source_kit import current, figures, start
from tests.imports.fake_source import TOKEN, FakeSource, fake_source, search_rows
from tests.imports.helpers import ORG, rows_of, run_next
from tests.imports.test_worker_process import WorkerProcess, wait_until

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PAGES = 30
PAGE_SIZE = 20
KILLED_AT = 10  # the page the first worker is waiting for when it is killed
DAY = date(2025, 1, 1)


@pytest.fixture(name="workdir")
def workdir_fixture() -> Iterator[Path]:
    """The data directory and the workers' logs (not pytest's shared tmp root)."""
    with tempfile.TemporaryDirectory(prefix="jobs-import-api-worker-") as path:
        yield Path(path)


@pytest.fixture(name="spawn")
def spawn_fixture(imports_url: str, workdir: Path) -> Iterator[Callable[[], WorkerProcess]]:
    started: list[WorkerProcess] = []

    def launch() -> WorkerProcess:
        worker = WorkerProcess(imports_url, workdir / "data", workdir / f"w{len(started)}.log")
        started.append(worker)
        worker.wait_started()
        return worker

    yield launch
    for worker in started:
        worker.close()


@pytest.fixture(name="source")
def source_fixture() -> Iterator[FakeSource]:
    yield from fake_source(search_rows(PAGES * PAGE_SIZE, bad_every=97), page_size=PAGE_SIZE)


@pytest.fixture(name="local")
def local_fixture(imports_engine: Engine, workdir: Path) -> ImportsModule:
    (workdir / "data").mkdir()
    return build_module(imports_engine, workdir / "data", allow_private_urls=True)


def test_kill_9_mid_import_then_resume_gives_the_rows_of_a_clean_run(
    local: ImportsModule, spawn: Callable[[], WorkerProcess], source: FakeSource
) -> None:
    target = local.service.create_site_target(ORG, "Example", "https://www.example.com")
    ApiSources(local.service).configure(ORG, target.id, source.url, TOKEN)
    clean = start(local, target, DAY)
    finished = run_next(local, "import_api")
    assert finished is not None
    assert finished.status is Status.DONE, finished.error
    expected = figures(local, clean.record.id)
    assert expected[1]["read"] == PAGES * PAGE_SIZE
    assert expected[1]["errors"] > 0
    totals = local.service.search_totals(ORG, target.id)

    reached, release = source.gate(KILLED_AT)
    first = spawn()
    view = start(local, target, DAY)  # the same range again: a new import (the first is done)
    wait_until(reached.is_set, 60, f"the worker to ask for page {KILLED_AT}")
    first.kill9()
    release.set()
    dead = current(local, view)
    assert dead.status is Status.RUNNING
    checkpoint = dict(dead.progress or {})["checkpoint"]
    assert (checkpoint["pages"], checkpoint["cursor"]) == (KILLED_AT - 1, f"p{KILLED_AT}")
    # what the dead attempt committed is exactly what its checkpoint says
    assert len(rows_of(local, view.record.id)) == checkpoint["inserted"]

    second = spawn()  # its sweep takes the zombie back, then it resumes the import
    wait_until(lambda: current(local, view).status.is_finished, 120, "the resumed import")
    resumed = current(local, view)
    assert resumed.status is Status.DONE, resumed.error
    assert resumed.attempts == 2
    assert figures(local, view.record.id) == expected
    assert second.alive()
    # the resumed attempt started at the cursor: pages before it were fetched once per import
    fetched = [request.page for request in source.requests]
    assert fetched.count(1) == 2
    assert fetched.count(KILLED_AT - 1) == 2
    assert fetched.count(KILLED_AT) == 3  # clean run, the killed attempt, the resumed one
    assert fetched.count(PAGES) == 2
    assert local.service.search_totals(ORG, target.id) == totals
