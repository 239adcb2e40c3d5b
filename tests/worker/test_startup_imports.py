"""What a worker and the CLI's reads import (issue 22): nothing they do not use. The read
commands (``jobs ls``, ``jobs show`` of a job that is not queued, ``jobs workers``) read on
psycopg alone, without SQLAlchemy or the store (decision 0049).

Checked in a fresh interpreter through ``sys.modules``; no time is measured here (that is
``python -m bench.startup``'s job): the structure is what a test can hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

import pytest

from tests.cli.helpers import clean_env, new_org

NEVER_IN_A_WORKER = ("fastapi", "starlette", "werkzeug", "dependency_injector", "uvicorn", "httpx")
"""The API's stack: a worker runs jobs, it serves no HTTP (decision 0026)."""

NEVER_IN_A_READ = (*NEVER_IN_A_WORKER, "pydantic", "jobs_worker", "jobs_imports", "yaml")
"""Besides: a read builds no registry, so it loads no module and validates no settings."""

NEVER_IN_A_READ_COMMAND = (
    "sqlalchemy",
    "jobs_postgres.store",
    "jobs_postgres.database",
    "jobs_core.service",
    "jobs_core.memory",
    "jobs_core.quota_service",
)
"""Besides, for the read commands: no SQLAlchemy, no store (they read through
``jobs_postgres.reads.DirectReads`` on one psycopg connection), and none of the core's use cases,
in-memory store or quota service, which they never call (``jobs_core`` imports its parts when
they are used; the quota commands' parser imports no quota service)."""

_REPORT = """
import json, sys
{code}
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(code: str, env: Mapping[str, str] | None = None) -> set[str]:
    """The modules in ``sys.modules`` after ``code`` ran in a new interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _REPORT.format(code=code)],
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded_after(code: str, env: Mapping[str, str] | None = None) -> set[str]:
    """The top-level packages in ``sys.modules`` after ``code`` ran in a new interpreter."""
    return {name.split(".")[0] for name in modules_after(code, env)}


def among(modules: set[str], names: tuple[str, ...]) -> set[str]:
    """Those of ``names`` (or of their submodules) that are in ``modules``."""
    return {name for name in names for module in modules if f"{module}.".startswith(f"{name}.")}


def test_the_worker_entry_point_imports_no_http_stack() -> None:
    loaded = loaded_after("import jobs_worker.main, jobs_worker.composition, jobs_postgres.store")
    assert "jobs_worker" in loaded  # the probe sees what it imported
    assert loaded.isdisjoint(NEVER_IN_A_WORKER), loaded & set(NEVER_IN_A_WORKER)


def test_the_imports_module_leaves_httpx_to_its_first_api_import() -> None:
    """Every worker serving the Imports module imports its registry at start; httpx (and the
    rich, click and pygments of its command line) would cost it ~0.12 s there."""
    loaded = loaded_after("import jobs_imports.registry, jobs_imports.module")
    assert "jobs_imports" in loaded
    assert loaded.isdisjoint({"httpx", "rich", "click", "pygments"}), loaded


def test_the_cli_entry_point_imports_neither_the_worker_nor_the_api() -> None:
    modules = modules_after("import jobs_cli.main; jobs_cli.main.build_parser(False)")
    assert "jobs_cli.main" in modules  # the probe sees what it imported
    # nor the database: `jobs --help`, or a command line refused, never load a driver
    assert not among(modules, (*NEVER_IN_A_READ, *NEVER_IN_A_READ_COMMAND, "psycopg"))


def test_a_name_of_jobs_core_imports_its_module_alone() -> None:
    """``from jobs_core import Job`` imports the model, not the use cases, the in-memory store
    or the handler's context (each is imported when its name is first used)."""
    modules = modules_after("from jobs_core import Job, JobFilter")
    assert {"jobs_core.domain", "jobs_core.ports"} <= modules
    assert not among(modules, ("jobs_core.service", "jobs_core.memory", "jobs_core.context"))
    everything = modules_after(
        "import jobs_core; [getattr(jobs_core, n) for n in jobs_core.__all__]"
    )
    assert {"jobs_core.service", "jobs_core.memory", "jobs_core.context"} <= everything


@pytest.mark.parametrize("status", ["cancelled", "queued"])
def test_the_reads_run_on_psycopg_alone_and_build_a_registry_only_for_a_queued_job(
    pg_url: str, status: str
) -> None:
    """``jobs ls`` (one org's, every org's), ``jobs show`` and ``jobs workers`` import no
    SQLAlchemy, no store and none of the core's use cases: only ``show`` of a queued job does,
    to build the registry its reasons need."""
    from jobs_core import NewJob, SystemClock
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    engine = create_engine(pg_url)
    try:
        store = PostgresJobStore(engine)
        job = store.insert(NewJob(new_org(), "noop"), SystemClock().now())
        assert job is not None
        if status == "cancelled":
            store.cancel(job.org_id, job.id, SystemClock().now())
    finally:
        engine.dispose()
    env = clean_env(JOBS_DATABASE_URL=pg_url, JOBS_DEMO_TYPES="1")
    for argv in (["ls", "--org", job.org_id], ["ls"], ["show", str(job.id)], ["workers"]):
        modules = modules_after(f"from jobs_cli.main import main; assert main({argv!r}) == 0", env)
        assert "jobs_postgres.reads" in modules
        if status == "queued" and argv[0] == "show":
            # why a queued job waits depends on its type's declarations: the registry is built,
            # on the store its modules may use
            assert {"jobs_worker", "sqlalchemy", "jobs_postgres.store"} <= modules
        else:
            assert not among(modules, (*NEVER_IN_A_READ, *NEVER_IN_A_READ_COMMAND)), argv
