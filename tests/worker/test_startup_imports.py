"""What a worker and the CLI's reads import (issue 22): nothing they do not use.

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

_REPORT = """
import json, sys
{code}
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}})))
"""


def loaded_after(code: str, env: Mapping[str, str] | None = None) -> set[str]:
    """The top-level packages in ``sys.modules`` after ``code`` ran in a new interpreter."""
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
    loaded = loaded_after("import jobs_cli.main; jobs_cli.main.build_parser(False)")
    assert loaded.isdisjoint(NEVER_IN_A_READ), loaded & set(NEVER_IN_A_READ)


@pytest.mark.parametrize("status", ["cancelled", "queued"])
def test_jobs_ls_and_show_build_a_registry_only_for_a_queued_job(pg_url: str, status: str) -> None:
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
    for argv in (["ls", "--org", job.org_id], ["show", str(job.id)]):
        loaded = loaded_after(f"from jobs_cli.main import main; assert main({argv!r}) == 0", env)
        assert "jobs_postgres" in loaded
        if status == "queued" and argv[0] == "show":
            # why a queued job waits depends on its type's declarations: the registry is built
            assert "jobs_worker" in loaded
        else:
            assert loaded.isdisjoint(NEVER_IN_A_READ), (argv, loaded & set(NEVER_IN_A_READ))
