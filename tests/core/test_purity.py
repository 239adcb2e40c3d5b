"""The boundaries of jobs-core (docs/architecture.md, decision 0030): the domain, its ports, the
use cases, the in-memory adapter and the testing kit, importing nothing outside the standard
library and nothing of it that starts a process or acts on the system. Dependencies point
inward: the adapters and the apps import the core, never the reverse; the child processes are
the worker's alone."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import jobs_core
import jobs_tokens

CORE = Path(jobs_core.__file__).parent
TOKENS = Path(jobs_tokens.__file__).parent
ROOT = Path(__file__).resolve().parents[2]

NOT_IN_THE_CORE = frozenset(
    {
        "subprocess",
        "ctypes",
        "selectors",
        "socket",
        "shutil",
        "tempfile",
        "multiprocessing",
        "fcntl",
        "pty",
        "resource",
    }
)
"""Standard modules that start processes or act on the system: the worker's (jobs_worker.child,
jobs_worker.reaper), the adapters' and the apps', never the core's."""

WORKER_ONLY = ("jobs_worker.child", "jobs_worker.reaper")
"""The child-process handling: imported by the worker alone (the API and the CLI load
manifests through ``jobs_worker.manifests``, whose handlers they never run)."""


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (dotted, absolute imports only), at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def imported_top_level_modules(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


def test_jobs_core_imports_only_the_standard_library_and_itself() -> None:
    sources = sorted(CORE.rglob("*.py"))
    assert len(sources) >= 8
    foreign = {
        f"{path.name}: {name}"
        for path in sources
        for name in imported_top_level_modules(path)
        if name not in sys.stdlib_module_names and name not in {"jobs_core", "__future__"}
    }
    assert foreign == set()


def test_jobs_core_starts_no_process_and_acts_on_no_system_resource() -> None:
    acting = {
        f"{path.name}: {name}"
        for path in sorted(CORE.rglob("*.py"))
        for name in imported_top_level_modules(path) & NOT_IN_THE_CORE
    }
    assert acting == set()


def test_only_the_worker_imports_the_child_process_handling() -> None:
    sources = [
        path
        for folder in ("packages", "apps")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "jobs_worker" not in path.parts and ".venv" not in path.parts
    ]
    assert any(path.match("*/jobs_api/*.py") for path in sources)
    assert any(path.match("*/jobs_cli/*.py") for path in sources)
    users = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources
        for name in imported_modules(path)
        if name.startswith(WORKER_ONLY)
    }
    assert users == set()


def test_the_credentials_are_a_package_beside_the_core_not_in_it() -> None:
    tokens = {name for path in TOKENS.rglob("*.py") for name in imported_modules(path)}
    workspace = {name for name in tokens if name.split(".")[0] not in sys.stdlib_module_names}
    assert {name.split(".")[0] for name in workspace} <= {"jobs_core", "__future__"}
    assert {name for name in workspace if name.count(".") == 1} <= {
        "jobs_core.clock",
        "jobs_core.ports",
        "__future__.annotations",
    }
    in_the_core = {
        f"{path.name}: {name}"
        for path in sorted(CORE.rglob("*.py"))
        for name in imported_top_level_modules(path)
        if name == "jobs_tokens"
    }
    assert in_the_core == set()
    assert not (CORE / "tokens.py").exists()


def test_the_checks_would_catch_what_the_old_core_imported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sqlalchemy\nfrom fastapi import FastAPI\nfrom . import sibling\n"
        "import ctypes.util\nimport subprocess\nfrom jobs_worker import child\n"
    )
    assert imported_top_level_modules(bad) == {
        "sqlalchemy",
        "fastapi",
        "ctypes",
        "subprocess",
        "jobs_worker",
    }
    assert imported_top_level_modules(bad) & NOT_IN_THE_CORE == {"ctypes", "subprocess"}
    assert any(name.startswith(WORKER_ONLY) for name in imported_modules(bad))
