"""Which job types a deployable serves: the one loader the worker, the API and the CLI share.

The modules come from :func:`jobs_core.modules.discover` (the ``jobs.modules`` entry-point
group, restricted by ``JOBS_MODULES``; decision 0024): :func:`load_modules` is the one call
the worker, ``jobs api``/``python -m jobs_api`` and the CLI make, so they load the same set in
the same order. Each module's registry is built with a :class:`~jobs_core.modules.ModuleContext`
(:func:`jobs_postgres.modules.opened_context`: an engine of its own on the deployment's
database, not the worker's, whose sessions are tuned for claims and finishes).

``JOBS_EXTRA_REGISTRIES=package.module:attribute`` is kept for compatibility: a plain
:class:`~jobs_core.Registry` (no tables, no routes, no engine), served besides the modules.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from jobs_core import Registry
from jobs_core.modules import (
    Module,
    ModuleContext,
    ModuleError,
    compose_modules,
    discover,
    selection_from,
)

__all__ = [
    "ModuleError",
    "RegistryLoadError",
    "compose",
    "load_modules",
    "load_registry",
    "worker_registry",
]


class RegistryLoadError(ValueError):
    """A ``module:attribute`` path does not name a :class:`~jobs_core.Registry`."""


def load_modules(demo_types: bool, environ: Mapping[str, str] | None = None) -> list[Module]:
    """The modules this deployment loads: every ``jobs.modules`` entry point, or those named by
    ``JOBS_MODULES`` in ``environ`` (the process's by default), in the stated order; the
    development ones (the demo types) only with ``demo_types``. Raises
    :class:`~jobs_core.modules.ModuleError` (a module that cannot be imported is never
    skipped)."""
    settings = os.environ if environ is None else environ
    return discover(selection_from(settings), development=demo_types)


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
    if isinstance(registry, Module):
        raise RegistryLoadError(
            f"{path!r} is a module declaration: name it in JOBS_MODULES, not as a registry"
        )
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
    demo_types: bool,
    extra: Sequence[str | Registry] = (),
    *,
    handlers_dir: Path | None = None,
    context: ModuleContext | None = None,
    modules: Sequence[Module] | None = None,
) -> Registry:
    """The registry a deployable runs: the modules' (``modules``, default :func:`load_modules`)
    built with ``context`` (without one, no database: the modules that own tables are left
    out), ``extra`` (registries, or ``module:attribute`` paths to load), and the
    manifest-declared types of ``handlers_dir`` (an invalid manifest is logged and skipped:
    :mod:`jobs_worker.manifests`). A type declared twice is an error naming both modules."""
    if modules is None:
        modules = load_modules(demo_types)
    if context is None:
        context = ModuleContext(engine=None, database_url=None, data_dir=Path(".data"))
    of_modules, _ = compose_modules(modules, context, name="worker")
    loaded = [item if isinstance(item, Registry) else load_registry(item) for item in extra]
    composed = compose([of_modules, *loaded])
    if handlers_dir is not None:
        from jobs_worker.manifests import load_handlers

        composed.include(load_handlers(Path(handlers_dir), taken=composed.names()))
    return composed
