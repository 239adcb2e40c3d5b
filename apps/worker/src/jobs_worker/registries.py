"""Which job types a deployable serves: the one list the worker, the API and the CLI share.

A module listed in :data:`MODULES` exposes either a ``registry`` attribute (types that need
nothing but an import) or ``build_registry(engine, data_dir)`` (types whose handlers use the
database, as ``jobs_imports`` does): :func:`shipped_registries` builds those on an engine of
their own. A deployment adds its own types without editing this package through
``JOBS_EXTRA_REGISTRIES=package.module:attribute``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from jobs_core import Registry

if TYPE_CHECKING:
    from sqlalchemy import Engine

MODULES: tuple[str, ...] = ("jobs_imports",)
"""The domain modules this distribution ships; each is used if it exposes ``registry``."""


class RegistryLoadError(ValueError):
    """A ``module:attribute`` path does not name a :class:`~jobs_core.Registry`."""


def module_registries(demo_types: bool) -> list[Registry]:
    """The registries of the shipped modules, and the demo types when ``demo_types``."""
    registries: list[Registry] = []
    if demo_types:
        from jobs_worker.demo import registry as demo

        registries.append(demo)
    for module in _installed_modules():
        registry = getattr(module, "registry", None)
        if isinstance(registry, Registry):
            registries.append(registry)
    return registries


def _installed_modules() -> Iterator[ModuleType]:
    for name in MODULES:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:  # the module is there but one of its imports is not
                raise
            # not installed in this environment


@contextmanager
def shipped_registries(database_url: str, data_dir: Path) -> Iterator[list[Registry]]:
    """The registries of the shipped modules whose handlers need the database.

    Each module of :data:`MODULES` that exposes ``build_registry(engine, data_dir)`` gets its
    registry built on one engine shared by those modules and disposed on exit: an engine of
    their own, not the worker's, whose sessions are tuned for claims and finishes.
    """
    builders: list[Callable[[Engine, Path], Registry]] = []
    for module in _installed_modules():
        if isinstance(getattr(module, "registry", None), Registry):
            continue  # served by module_registries
        build = getattr(module, "build_registry", None)
        if callable(build):
            builders.append(build)
    if not builders:
        yield []
        return
    from jobs_postgres.database import create_engine

    engine = create_engine(database_url)
    try:
        yield [build(engine, Path(data_dir)) for build in builders]
    finally:
        engine.dispose()


def load_registry(path: str) -> Registry:
    """Import ``package.module:attribute`` and return that registry (a clear error otherwise)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise RegistryLoadError(f"{path!r} is not a 'module:attribute' path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise RegistryLoadError(f"cannot import {module_name!r} (from {path!r}): {error}") from None
    registry = getattr(module, attribute, None)
    if not isinstance(registry, Registry):
        found = "nothing" if registry is None else type(registry).__name__
        raise RegistryLoadError(f"{path!r} is {found}, not a jobs_core.Registry")
    return registry


def compose(registries: Iterable[Registry], name: str = "worker") -> Registry:
    """One registry with the types of all of ``registries`` (a type name twice is an error)."""
    composed = Registry(name)
    for registry in registries:
        composed.include(registry)
    return composed


def worker_registry(
    demo_types: bool, extra: Sequence[str | Registry] = (), *, handlers_dir: Path | None = None
) -> Registry:
    """The registry a worker runs: the modules', the demo types if asked, ``extra``
    (registries, or ``module:attribute`` paths to load), and the manifest-declared types of
    ``handlers_dir`` (an invalid manifest is logged and skipped: :mod:`jobs_worker.manifests`)."""
    loaded = [item if isinstance(item, Registry) else load_registry(item) for item in extra]
    composed = compose([*module_registries(demo_types), *loaded])
    if handlers_dir is not None:
        from jobs_worker.manifests import load_handlers

        composed.include(load_handlers(Path(handlers_dir), taken=composed.names()))
    return composed
