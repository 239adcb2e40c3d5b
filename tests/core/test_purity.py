"""jobs-core imports nothing outside the standard library (README, Architecture: dependencies
point inward)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import jobs_core

CORE = Path(jobs_core.__file__).parent


def imported_top_level_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


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


def test_the_check_would_catch_a_third_party_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sqlalchemy\nfrom fastapi import FastAPI\nfrom . import sibling\n")
    assert imported_top_level_modules(bad) == {"sqlalchemy", "fastapi"}
