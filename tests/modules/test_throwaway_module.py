"""A module written outside the repository plugs in with zero edits to it (issue 15, decision 0024).

A throwaway package is written into a temporary directory: a ``pyproject.toml`` declaring its
``jobs.modules`` entry point, a job type, an Alembic chain creating a table, a FastAPI router
that writes a row and enqueues its job in one transaction (``jobs_postgres.enqueue``), and a CLI
command. It is installed into a temporary virtualenv that also holds this workspace's packages
(pinned from ``uv.lock``); then, with real processes of that virtualenv: ``jobs migrate``
creates its table, ``jobs api`` serves its route over HTTP behind the org dependency, ``jobs
worker`` runs its job to done, ``jobs throwaway count`` runs its command. The repository's files
are the same before and after.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import clean_env, free_port, last_line, start, wait_until
from tests.dropping import drop_later

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE_PACKAGES = (
    "packages/jobs-core",
    "packages/jobs-tokens",
    "packages/jobs-metrics",
    "packages/jobs-postgres",
    "packages/imports",
    "apps/api",
    "apps/worker",
    "apps/cli",
)

PYPROJECT = """\
[project]
name = "jobs-throwaway"
version = "0.0.1"
description = "A module written against the README only, outside the repository."
requires-python = ">=3.11"
dependencies = ["jobs-core", "jobs-postgres", "fastapi", "sqlalchemy"]

[project.entry-points."jobs.modules"]
throwaway = "jobs_throwaway.module:module"

[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["src/jobs_throwaway"]
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations as written.
MODULE = '''\
"""The throwaway module: one table, one job type, one route, one command."""

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException
from jobs_core import JobContext, JobType, Registry
from jobs_core.modules import CliCommand, Module, ModuleContext, RouteContext
from sqlalchemy import text

STAMP = "throwaway_stamp"


def _registry(engine: Any) -> Registry:
    registry = Registry("throwaway")

    def stamp(ctx: JobContext) -> dict[str, Any]:
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE throwaway_notes SET stamped_by = :job"
                     " WHERE id = :id AND org_id = :org"),
                {"job": ctx.job.id, "id": uuid.UUID(ctx.payload["note_id"]), "org": ctx.job.org_id},
            )
        return {"stamped": ctx.payload["note_id"]}

    registry.register(JobType(name=STAMP, handler=stamp, description="Stamp a note."))
    return registry


def build_registry(ctx: ModuleContext) -> Registry:
    return _registry(ctx.engine)


def routers(ctx: RouteContext) -> list[APIRouter]:
    from jobs_postgres import enqueue

    engine = ctx.module.engine
    registry = _registry(engine)
    router = APIRouter(prefix="/throwaway", tags=["throwaway"])
    Org = Annotated[str, Depends(ctx.current_org)]

    @router.post("/notes", status_code=201)
    def create_note(org: Org, note: Annotated[str, Body(embed=True)]) -> dict[str, str]:
        note_id = uuid.uuid4()
        with engine.begin() as conn:  # the row and its job commit together
            conn.execute(
                text("INSERT INTO throwaway_notes (id, org_id, note) VALUES (:id, :org, :note)"),
                {"id": note_id, "org": org, "note": note},
            )
            enqueued = enqueue(conn, registry, org, STAMP, {"note_id": str(note_id)})
        return {"id": str(note_id), "job_id": str(enqueued.job.id)}

    @router.get("/notes/{note_id}")
    def read_note(note_id: uuid.UUID, org: Org) -> dict[str, Any]:
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT note, stamped_by FROM throwaway_notes"
                     " WHERE id = :id AND org_id = :org"),
                {"id": note_id, "org": org},
            ).first()
        if row is None:
            raise HTTPException(404, "no such note")
        stamped = str(row.stamped_by) if row.stamped_by is not None else None
        return {"id": str(note_id), "note": row.note, "stamped_by": stamped}

    return [router]


def count(args: Any, ctx: ModuleContext) -> int:
    with ctx.engine.connect() as conn:
        total = conn.execute(text("SELECT count(*) FROM throwaway_notes")).scalar_one()
    print(f"{total} notes")
    return 0


module = Module(
    name="throwaway",
    build_registry=build_registry,
    migrations="jobs_throwaway.migrations",
    routers=routers,
    cli=(CliCommand(name="count", help="count the notes", run=count),),
)
'''

ENV_PY = """\
from jobs_postgres.migrations import run_online

run_online()
"""

REVISION = '''\
"""The notes table."""

import sqlalchemy as sa
from alembic import op

revision = "0001_throwaway_notes"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "throwaway_notes",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("stamped_by", sa.Uuid, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("throwaway_notes")
'''


def _write_package(root: Path) -> Path:
    package = root / "jobs-throwaway"
    source = package / "src" / "jobs_throwaway"
    (source / "migrations" / "versions").mkdir(parents=True)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (source / "__init__.py").write_text('"""A throwaway jobs module."""\n')
    (source / "module.py").write_text(MODULE)
    (source / "migrations" / "__init__.py").write_text("")
    (source / "migrations" / "env.py").write_text(ENV_PY)
    (source / "migrations" / "script.py.mako").write_text(
        (ROOT / "packages/imports/src/jobs_imports/migrations/script.py.mako").read_text()
    )
    (source / "migrations" / "versions" / "0001_throwaway_notes.py").write_text(REVISION)
    return package


def _uv_pip(uv: str, python: Path, *args: str) -> None:
    """``uv pip install`` from the cache when it can, else from the registry."""
    base = [uv, "pip", "install", "--quiet", "--python", str(python), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    offline = subprocess.run(
        [*base, "--offline"], capture_output=True, text=True, env=env, check=False
    )
    if offline.returncode == 0:
        return
    online = subprocess.run(base, capture_output=True, text=True, env=env, timeout=400, check=False)
    assert online.returncode == 0, f"uv pip install failed:\n{offline.stderr}\n{online.stderr}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with this workspace's packages (dependencies pinned by ``uv.lock``) and the
    throwaway module installed like any third-party package."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    root = tmp_path_factory.mktemp("throwaway")
    package = _write_package(root)
    venv = root / "venv"
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", str(Path(sys.executable).resolve()), str(venv)],
        check=True,
        timeout=120,
    )
    pins = root / "requirements.txt"
    export = ["export", "--frozen", "--no-dev", "--no-emit-workspace", "--no-hashes", "--quiet"]
    subprocess.run(
        [uv, *export, "--output-file", str(pins)],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    _uv_pip(uv, python, "-r", str(pins))
    editables = [arg for path in WORKSPACE_PACKAGES for arg in ("-e", str(ROOT / path))]
    _uv_pip(uv, python, "--no-deps", *editables, str(package))
    return venv


@pytest.fixture
def database(pg_url: str) -> Iterator[str]:
    """An empty database of its own, dropped afterwards."""
    from jobs_postgres.database import ensure_database, with_database

    admin = with_database(pg_url, "postgres")
    name = f"jobs_modules_{secrets.token_hex(4)}"
    ensure_database(admin, name)
    try:
        yield with_database(pg_url, name)
    finally:
        drop_later(admin, name)  # off the test's clock (tests/dropping.py)


def _repository_state() -> str:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    diff = subprocess.run(["git", "diff"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout + diff.stdout


def _http(
    method: str, url: str, token: str | None = None, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_a_module_installed_outside_the_repository_is_migrated_served_run_and_routed(
    venv: Path, database: str, tmp_path: Path
) -> None:
    before = _repository_state()
    jobs = str(venv / "bin" / "jobs")
    env = clean_env(
        JOBS_DATABASE_URL=database,
        JOBS_DATA_DIR=str(tmp_path / "data"),
        JOBS_DEMO_TYPES="0",
        JOBS_ISOLATED_TYPES="-",
        VIRTUAL_ENV=str(venv),
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [jobs, *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    # jobs migrate: the jobs chain, then each module's in the stated order (by name)
    migrated = run("migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "(chains: jobs, imports, throwaway)" in migrated.stdout
    from jobs_postgres.database import create_engine
    from sqlalchemy import text

    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT to_regclass('throwaway_notes')")).scalar_one()
            version = conn.execute(text("SELECT version_num FROM alembic_version_throwaway"))
            assert version.scalar_one() == "0001_throwaway_notes"
    finally:
        engine.dispose()
    again = run("migrate")  # idempotent
    assert again.returncode == 0, again.stderr

    created = run("token", "create", "--org", "acme")
    assert created.returncode == 0, created.stderr
    token = last_line(created.stdout)

    port = free_port()
    api, api_output = start([jobs, "api", "--port", str(port)], env)
    worker: subprocess.Popen[str] | None = None
    try:
        base = f"http://127.0.0.1:{port}"
        api_output.wait_for(lambda line: "Uvicorn running" in line, timeout=60)
        # behind the org dependency: no token, no route
        assert _http("POST", f"{base}/throwaway/notes", None, {"note": "x"})[0] == 401
        status, note = _http("POST", f"{base}/throwaway/notes", token, {"note": "hello"})
        assert status == 201, note
        status, job = _http("GET", f"{base}/jobs/{note['job_id']}", token)
        assert (status, job["type"], job["status"]) == (200, "throwaway_stamp", "queued")
        _, paths = _http("GET", f"{base}/openapi.json")
        assert "/throwaway/notes" in paths["paths"]

        worker, worker_output = start([jobs, "worker", "--concurrency", "1"], env)

        def done() -> dict[str, Any] | None:
            _, body = _http("GET", f"{base}/jobs/{note['job_id']}", token)
            if body["status"] in {"failed", "cancelled"}:
                raise AssertionError(f"{body}\n{worker_output.text()}")
            return body if body["status"] == "done" else None

        finished = wait_until("the module's job to be done", done, timeout=90)
        assert finished["report"] == {"stamped": note["id"]}
        status, read = _http("GET", f"{base}/throwaway/notes/{note['id']}", token)
        assert (status, read["note"], read["stamped_by"]) == (200, "hello", note["job_id"])
        # another org does not see the note: the module's route acts for the token's org
        other = last_line(run("token", "create", "--org", "other").stdout)
        assert _http("GET", f"{base}/throwaway/notes/{note['id']}", other)[0] == 404
    finally:
        _stop(api)
        if worker is not None:
            _stop(worker)

    counted = run("throwaway", "count")
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.strip() == "1 notes"
    assert _repository_state() == before
