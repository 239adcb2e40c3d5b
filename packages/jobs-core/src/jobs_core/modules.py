"""Module declarations: how a domain module plugs its job types, tables, routes and commands
into every deployable (worker, API, CLI) without editing them (decision 0024).

A module ships one :class:`Module` object and names it in its ``pyproject.toml``::

    [project.entry-points."jobs.modules"]
    linkcheck = "jobs_linkcheck.module:module"

The deployables find every installed module through that entry-point group
(:data:`ENTRY_POINT_GROUP`), or only those a deployment names in ``JOBS_MODULES``
(:func:`discover`); the worker, the API and the CLI call the same :func:`discover`, so they load
exactly the same set, in the same order (:func:`ordered`).

What a module declares (every field but ``name`` is optional):

- ``build_registry(ctx)`` → the :class:`~jobs_core.Registry` of its job types (and of its
  schedules: ``registry.schedule(...)``), built with a :class:`ModuleContext`: an engine on the
  deployment's database, the data directory, the settings.
- ``migrations``: the dotted name of an importable package holding an Alembic ``env.py`` and
  ``versions/`` (its chain, with its own version table ``alembic_version_<name>`` unless
  ``version_table`` says otherwise); ``jobs migrate`` runs it after the jobs chain.
- ``routers(ctx)`` → FastAPI ``APIRouter`` objects, built with a :class:`RouteContext`; the API
  mounts them behind its org dependency (``ctx.current_org`` gives the org to a route).
- ``body_limits(ctx)`` → ``{path: bytes}``: routes that accept larger bodies than the API's
  default limit (uploads).
- ``cli``: :class:`CliCommand` objects, offered as ``jobs <module name> <command>``.
- ``requires``: names of modules that must be loaded (and migrated) before this one.
- ``development``: loaded only with the demo types on (``JOBS_DEMO_TYPES``); its types are
  internal over HTTP unless ``JOBS_DEMO_OVER_HTTP`` (the demo types are such a module).

Nothing here imports SQLAlchemy, FastAPI or any other third-party package: the engine and the
routers are typed loosely (``Any`` / ``object``), the deployables give and take the real objects.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from jobs_core.clock import SystemClock
from jobs_core.errors import DuplicateJobType
from jobs_core.ports import Clock
from jobs_core.registry import Registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "MODULES_SETTING",
    "CliCommand",
    "DuplicateModuleType",
    "Module",
    "ModuleContext",
    "ModuleError",
    "RouteContext",
    "compose_modules",
    "discover",
    "load_module",
    "ordered",
    "selection_from",
    "servable",
]

ENTRY_POINT_GROUP = "jobs.modules"
"""The Python packaging entry-point group a module is declared in."""

MODULES_SETTING = "JOBS_MODULES"
"""The setting that restricts the modules loaded: comma-separated entry-point names or
``package.module:attribute`` paths; unset or empty, every installed module; ``-``, none."""


class ModuleError(ValueError):
    """A module cannot be loaded: not importable, not a :class:`Module`, named twice, a type
    declared by two modules, a required module missing. The message names the module(s)."""


@dataclass(frozen=True, slots=True)
class ModuleContext:
    """What a deployable gives a module's builders.

    - ``engine``: a SQLAlchemy ``Engine`` on the deployment's database (``JOBS_DATABASE_URL``, or
      the embedded server of ``jobs dev``), owned and disposed by the deployable; None where
      there is no database (the API on ``JOBS_STORE=memory``).
    - ``database_url``: that database's URL (resolved: the embedded server's too), or None.
    - ``data_dir``: the deployment's data directory (``JOBS_DATA_DIR``), shared by API and
      workers (uploads, files).
    - ``settings``: the deployable's settings as ``JOBS_*`` names and string values: the
      ``JOBS_*`` environment, overlaid with the values the deployable resolved (the API's
      ``JOBS_MAX_UPLOAD_BYTES`` default, say). A module reads its own ``JOBS_<MODULE>_*`` here.
    - ``clock``: the deployable's clock (a fake one in tests).
    """

    engine: Any | None
    database_url: str | None
    data_dir: Path
    settings: Mapping[str, str] = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)


@dataclass(frozen=True, slots=True)
class RouteContext:
    """What the API gives a module's ``routers`` builder: the :class:`ModuleContext` and
    ``current_org``, the FastAPI dependency that authenticates a request and returns its org
    (a plain function, run in the thread pool): ``org: Annotated[str, Depends(ctx.current_org)]``.
    The API also mounts every module router behind it, so no module route is ever anonymous.
    """

    module: ModuleContext
    current_org: Callable[..., str]


@dataclass(frozen=True, slots=True)
class CliCommand:
    """One command of a module's CLI, offered as ``jobs <module> <name>``.

    ``configure(parser)`` adds its arguments; ``run(args, ctx)`` runs it with a
    :class:`ModuleContext` on the deployment's database and returns the exit code.
    """

    name: str
    help: str
    run: Callable[[argparse.Namespace, ModuleContext], int]
    configure: Callable[[argparse.ArgumentParser], None] | None = None


@dataclass(frozen=True, slots=True)
class Module:
    """One domain module's declaration (see the module docstring for each field)."""

    name: str
    build_registry: Callable[[ModuleContext], Registry] | None = None
    migrations: str | None = None
    version_table: str | None = None
    routers: Callable[[RouteContext], Sequence[object]] | None = None
    body_limits: Callable[[ModuleContext], Mapping[str, int]] | None = None
    cli: Sequence[CliCommand] = ()
    requires: tuple[str, ...] = ()
    development: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "a").isalnum() or not self.name.islower():
            raise ModuleError(
                f"module name {self.name!r}: lowercase letters, digits and '_' only "
                "(it names a version table and a CLI command)"
            )

    @property
    def migration_version_table(self) -> str:
        """The Alembic version table of the module's chain."""
        return self.version_table or f"alembic_version_{self.name}"

    def registry(self, ctx: ModuleContext) -> Registry:
        """The module's job types bound to ``ctx`` (an empty registry if it declares none)."""
        if self.build_registry is None:
            return Registry(self.name)
        registry = self.build_registry(ctx)
        if not isinstance(registry, Registry):
            raise ModuleError(
                f"module {self.name!r}: build_registry returned a {type(registry).__name__}, "
                "not a jobs_core.Registry"
            )
        return registry


def selection_from(settings: Mapping[str, str]) -> tuple[str, ...] | None:
    """``JOBS_MODULES`` parsed: None (unset or empty: every installed module), ``()`` (``-``:
    none), or the names and paths it lists."""
    raw = settings.get(MODULES_SETTING, "").strip()
    if not raw:
        return None
    if raw == "-":
        return ()
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def load_module(path: str) -> Module:
    """The :class:`Module` at ``package.module:attribute`` (a clear :class:`ModuleError`)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ModuleError(f"{path!r} is not a 'package.module:attribute' path")
    try:
        loaded = importlib.import_module(module_name)
    except Exception as error:
        raise ModuleError(f"module {path!r} cannot be imported: {error}") from error
    return _checked(getattr(loaded, attribute, None), path)


def _checked(value: object, where: str) -> Module:
    if callable(value) and not isinstance(value, Module):
        value = value()  # a factory that returns the declaration
    if not isinstance(value, Module):
        found = "nothing" if value is None else f"a {type(value).__name__}"
        raise ModuleError(f"module {where!r} is {found}, not a jobs_core.modules.Module")
    return value


def _entry_points() -> dict[str, metadata.EntryPoint]:
    found: dict[str, metadata.EntryPoint] = {}
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        previous = found.get(point.name)
        if previous is not None and previous.value != point.value:
            raise ModuleError(
                f"two installed modules are named {point.name!r}: {previous.value} "
                f"and {point.value} (entry points of group {ENTRY_POINT_GROUP!r})"
            )
        found[point.name] = point
    return found


def _load_entry_point(point: metadata.EntryPoint) -> Module:
    where = f"{point.name} = {point.value}"
    try:
        value = point.load()
    except Exception as error:
        dist = getattr(point.dist, "name", None)
        origin = f" (distribution {dist})" if dist else ""
        raise ModuleError(f"module {where!r}{origin} cannot be imported: {error}") from error
    module = _checked(value, where)
    if module.name != point.name:
        raise ModuleError(
            f"module {where!r} declares the name {module.name!r}: the entry point's name and "
            "the declaration's must be the same"
        )
    return module


def discover(selection: Sequence[str] | None = None, *, development: bool = False) -> list[Module]:
    """The modules a deployable loads, in :func:`ordered` order.

    ``selection`` (``JOBS_MODULES``, see :func:`selection_from`): None loads every module
    installed under :data:`ENTRY_POINT_GROUP`; otherwise exactly the modules named, each an
    entry-point name or a ``package.module:attribute`` path (an unknown name is an error).
    ``development`` modules are left out unless ``development`` (``JOBS_DEMO_TYPES``). A module
    that fails to import is an error, never skipped.
    """
    points = _entry_points()
    modules: list[Module] = []
    if selection is None:
        modules = [_load_entry_point(points[name]) for name in sorted(points)]
    else:
        for item in selection:
            if ":" in item:
                modules.append(load_module(item))
            elif item in points:
                modules.append(_load_entry_point(points[item]))
            else:
                known = ", ".join(sorted(points)) or "none"
                raise ModuleError(
                    f"{MODULES_SETTING}: no installed module is named {item!r} (installed: {known})"
                )
    if not development:
        modules = [module for module in modules if not module.development]
    return ordered(modules)


def ordered(modules: Iterable[Module]) -> list[Module]:
    """``modules`` in the order they are migrated and composed: every module after the
    modules it ``requires``, otherwise by name. A name twice, a required module that is not
    loaded and a cycle are errors."""
    by_name: dict[str, Module] = {}
    for module in modules:
        if module.name in by_name and by_name[module.name] != module:
            raise ModuleError(f"two modules are named {module.name!r}")
        by_name[module.name] = module
    for module in by_name.values():
        missing = [name for name in module.requires if name not in by_name]
        if missing:
            raise ModuleError(
                f"module {module.name!r} requires {', '.join(map(repr, missing))}, not loaded "
                f"(install it, or name it in {MODULES_SETTING})"
            )
    result: list[Module] = []
    placed: set[str] = set()
    while len(result) < len(by_name):
        ready = [
            name
            for name in sorted(by_name)
            if name not in placed and all(req in placed for req in by_name[name].requires)
        ]
        if not ready:
            cycle = sorted(set(by_name) - placed)
            raise ModuleError(f"modules {', '.join(cycle)} require each other (a cycle)")
        result.append(by_name[ready[0]])
        placed.add(ready[0])
    return result


def compose_modules(
    modules: Iterable[Module], ctx: ModuleContext, name: str = "modules"
) -> tuple[Registry, dict[str, str]]:
    """One registry with every module's types, and ``{type name: module name}``.

    Without a database (``ctx.engine`` None: the API on the memory store) the modules that own
    tables (``migrations``) are left out: they are served only where their tables are. A type
    declared by two modules is a :class:`DuplicateModuleType` naming both modules.
    """
    composed = Registry(name)
    owners: dict[str, str] = {}
    for module in servable(modules, ctx):
        registry = module.registry(ctx)
        for job_type in registry:
            if job_type.name in owners:
                raise DuplicateModuleType(job_type.name, owners[job_type.name], module.name)
            owners[job_type.name] = module.name
        composed.include(registry)
    return composed, owners


def servable(modules: Iterable[Module], ctx: ModuleContext) -> list[Module]:
    """The modules that can be served with ``ctx``: all of them on a database, else those that
    own no tables."""
    return [module for module in modules if ctx.engine is not None or module.migrations is None]


class DuplicateModuleType(DuplicateJobType):
    """Two modules declare a job type of the same name."""

    def __init__(self, type_name: str, first: str, second: str) -> None:
        super().__init__(type_name)
        self.args = (
            f"job type {type_name!r} is declared by module {first!r} and by module {second!r}",
        )
        self.modules = (first, second)

    def __str__(self) -> str:
        return str(self.args[0])
