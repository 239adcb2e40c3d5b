"""docs/architecture.md's concept map stays true: each name it cites exists where it says
(issue 28 point 6).

The map's convention, read cell by cell ("decided in" and "applied by"), left to right: a
backticked path (``jobs_core/domain.py``, ``apps/worker/.../fence.py``, ``memory.py`` for the
folder of the path before it, or a package such as ``jobs_tokens``) says where the names after
it live, until the next path. A name is found there if the module defines it (a function, a
class, a field or constant, at any depth), imports it, holds it as an enum's value or a
constraint's name, or creates it in its SQL (a migration's function).
``Class.member`` names a class of the workspace and one of its members, ``module.name`` a module
of the same package (or ``jobs_core.module.name``), ``table.column`` a column of
``jobs_postgres.schema``. A trailing ``*`` is a prefix, ``(...)`` the arguments.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
SOURCES = tuple(
    sorted(
        path
        for folder in ("packages", "apps")
        for path in (ROOT / folder).glob("*/src/**/*.py")
        if ".venv" not in path.parts
    )
)
PACKAGES = frozenset(
    path.parent.name
    for path in SOURCES
    if path.name == "__init__.py" and path.parent.parent.name == "src"
)
SQL_DEFINITION = re.compile(
    r"CREATE (?:OR REPLACE )?(?:UNIQUE )?(?:FUNCTION|TRIGGER|INDEX|TABLE|VIEW) (\w+)", re.I
)
"""What a migration's SQL defines (its functions, triggers, indexes, tables)."""
CORE = ROOT / "packages" / "jobs-core" / "src" / "jobs_core"
TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Citation:
    concept: str
    name: str
    where: Path | None
    unresolved: str | None = None


def rows(text: str) -> list[tuple[str, list[str]]]:
    """The map's rows: the concept, and its "decided in" and "applied by" cells."""
    section = text.split("## Concept map", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("**"):
            found.append((cells[0], cells[1:3]))
    return found


def is_path(token: str) -> bool:
    return token.endswith(".py") or "/" in token or token in PACKAGES


def resolve(token: str, here: Path | None) -> Path:
    """The file a path token names: ``memory.py`` in the folder of ``here`` if there is one,
    else the one source whose path ends so (``.../`` stands for any folders)."""
    if not token.endswith(".py"):  # a package or its folder
        token = token.rsplit("/", maxsplit=1)[-1].replace("-", "_") + "/__init__.py"
    if here is not None and "/" not in token and (here.parent / token).exists():
        return here.parent / token
    head, _, tail = token.partition("/.../")
    pattern = re.compile(
        (r"(^|/)" + re.escape(head) + r"/(.+/)?" + re.escape(tail))
        if tail
        else (r"(^|/)" + re.escape(token)) + "$"
    )
    matches = [p for p in SOURCES if pattern.search(p.relative_to(ROOT).as_posix())]
    assert len(matches) == 1, f"`{token}` names {len(matches)} files: {matches}"
    return matches[0]


@functools.cache
def names_in(path: Path) -> frozenset[str]:
    """What a module defines (at any depth), imports, holds as a plain string constant that
    is an identifier (an enum's value, a constraint's name), or defines in its SQL."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.isidentifier():
                names.add(node.value)
            names.update(SQL_DEFINITION.findall(node.value))
    return frozenset(names)


@functools.cache
def classes() -> dict[str, list[ast.ClassDef]]:
    found: dict[str, list[ast.ClassDef]] = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def member_of(class_name: str, member: str) -> bool:
    """True if a class of that name in the workspace defines ``member``."""
    for node in classes().get(class_name, []):
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == member:
                return True
            target = item.target if isinstance(item, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and target.id == member:
                return True
    return False


def column_of(table: str, column: str) -> bool:
    from jobs_postgres import schema
    from sqlalchemy import Table

    tables = [t for t in vars(schema).values() if isinstance(t, Table) and t.name == table]
    return any(column in t.c for t in tables)


def exists(name: str, here: Path | None) -> bool:
    name = re.sub(r"\(.*\)$", "", name)
    if "." in name:
        owner, _, member = name.rpartition(".")
        if owner[:1].isupper():
            return member_of(owner, member)
        if owner.startswith("jobs_"):
            return member in names_in(resolve(owner.replace(".", "/") + ".py", None))
        for module in (here.parent if here else None, CORE):
            if module is not None and (module / f"{owner}.py").exists():
                return member in names_in(module / f"{owner}.py")
        return column_of(owner, member)
    assert here is not None, f"`{name}` comes before any path"
    if name.endswith("*"):
        return any(defined.startswith(name[:-1]) for defined in names_in(here))
    return name in names_in(here)


def citations() -> list[Citation]:
    found = []
    for concept, cells in rows(MAP.read_text()):
        for cell in cells:
            here: Path | None = None
            for token in TICKED.findall(cell):
                if is_path(token):
                    try:
                        here = resolve(token, here)
                    except AssertionError as error:
                        found.append(Citation(concept, token, None, str(error).split("\n")[0]))
                        here = None
                else:
                    found.append(Citation(concept, token, here))
    return found


def test_the_map_cites_names_in_every_row() -> None:
    concepts = {citation.concept for citation in citations()}
    assert len(rows(MAP.read_text())) >= 15
    assert len(concepts) >= 15
    assert len(citations()) >= 60


@pytest.mark.parametrize(
    "citation",
    citations(),
    ids=lambda c: f"{c.concept.split('**')[1]}:{c.name}",
)
def test_each_name_the_concept_map_cites_exists_where_it_says(citation: Citation) -> None:
    assert citation.unresolved is None, citation.unresolved
    where = citation.where.relative_to(ROOT) if citation.where else "-"
    assert exists(citation.name, citation.where), f"`{citation.name}` is not in {where}"


def test_the_check_sees_a_name_that_moved() -> None:
    domain = resolve("jobs_core/domain.py", None)
    assert exists("sweep_patch", domain)
    assert not exists("SubprocessHandler", domain)  # moved to the worker: the map must say so
    assert exists("JobService.sweep", domain)
    assert not exists("JobService.no_such_use_case", domain)
    assert exists("jobs.checkpoint", domain)
    assert not exists("jobs.no_such_column", domain)
    with pytest.raises(AssertionError, match="names 0 files"):
        resolve("jobs_core/child.py", None)
