"""The README's quick start, as written, in a fresh clone, on the embedded PostgreSQL.

The first command of the README is run step by step (its ``&&`` parts) in a ``git clone`` of this
repository: ``uv run`` builds the clone's own environment (from the uv cache) and ``jobs dev``
starts the embedded server in the clone's ``.data``. The follow-up commands of the README run
from "another terminal"; a job must reach done and stay visible after a restart; Ctrl-C (SIGINT
to the process group, as a terminal sends it) must stop everything with exit code 0.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import (
    assert_all_gone,
    clean_env,
    descendants,
    free_port,
    last_line,
    start,
    token_of,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def sh_blocks(markdown: str) -> list[list[str]]:
    """The lines of each ```sh block, comments stripped, blank lines dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", markdown, re.S)
    result = []
    for block in blocks:
        lines = [line.split("  #")[0].strip() for line in block.splitlines()]
        result.append([line for line in lines if line and not line.startswith("#")])
    return result


def user_env(**values: str) -> dict[str, str]:
    """A newcomer's shell: no JOBS_ variable, not inside this checkout's virtual environment."""
    env = clean_env(**values)
    env.pop("VIRTUAL_ENV", None)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    return env


def test_the_readme_names_the_two_commands_first() -> None:
    first = sh_blocks(README.read_text())[0]
    assert first[0] == "python3 -m pip install -q uv && python3 -m uv run jobs dev"
    # The test command is the one CI runs (.ci/run), exactly.
    assert first[1] == "uv sync --frozen && uv run pytest"
    assert "uv sync --frozen\n" in (ROOT / ".ci" / "run").read_text()
    assert "\nuv run pytest\n" in (ROOT / ".ci" / "run").read_text()


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, (argv, result.stdout, result.stderr)
    return result.stdout


@pytest.fixture
def clone_dir() -> Iterator[Path]:
    """A directory for the clone outside pytest's temporary root.

    Run as root, pgserver runs PostgreSQL as the user ``pgserver`` and opens the directories on
    the way to its binaries and data for it; every pytest session that starts resets
    ``/tmp/pytest-of-root`` to mode 0700, and a server living below it then fails to read its
    own time zone files ("invalid value for parameter TimeZone").
    """
    path = Path(tempfile.mkdtemp(prefix="jobs-quickstart-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_quick_start_in_a_fresh_clone(clone_dir: Path) -> None:
    blocks = sh_blocks(README.read_text())
    install, run_dev = (shlex.split(part) for part in blocks[0][0].split("&&"))
    enqueue_line, show_line = blocks[1][0], blocks[1][1]
    assert enqueue_line.startswith("uv run jobs enqueue sleep --org demo")

    clone = clone_dir / "jobs"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=60)
    # The API on a free port rather than 8000, which a developer's own `jobs dev` may hold.
    env = user_env(JOBS_API_PORT=str(free_port()))

    run(install, clone, env)  # pip: a no-op where uv is installed already
    dev, output = start(run_dev, env, cwd=clone, new_group=True)
    pgdata = clone / ".data" / "pg"
    try:
        token = token_of(output, timeout=180)
        assert token.startswith("jobs_")
        assert f"data in {clone / '.data'}" in output.text()

        # "From another terminal, in the same directory" (no JOBS_API_PORT: the CLI needs none).
        other = user_env()
        job_id = last_line(run(shlex.split(enqueue_line), clone, other))
        show = shlex.split(show_line.replace("<id>", job_id))

        def done() -> str | None:
            text = run(show, clone, other)
            return text if re.search(r"^status +done$", text, re.M) else None

        shown = wait_until("the sleep job to be done", done, timeout=60, every=1)
        assert "[##########] 100%" in shown

        tree = descendants(dev.pid)
        postgres = _postgres_processes(pgdata)
        assert postgres, "the embedded server should run while jobs dev does"
        os.killpg(dev.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert dev.wait(60) == 0, output.text()
        assert_all_gone([*tree, *postgres], timeout=30)
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()

    # The data persists: a later command finds the job, and leaves no server running.
    assert done() is not None
    assert_all_gone(_postgres_processes(pgdata), timeout=30)


def _postgres_processes(pgdata: Path) -> list[object]:
    import psutil  # type: ignore[import-untyped]

    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and str(pgdata) in " ".join(cmdline):
            found.append(process)
    return found
