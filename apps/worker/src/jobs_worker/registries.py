"""Which job types a deployable serves: the one list the worker, the API and the CLI share.

A module (``jobs_imports`` now, a crawler later) exposes a ``registry`` attribute; it is listed
in :data:`MODULES` and nothing else changes. A deployment adds its own types without editing
this package through ``JOBS_EXTRA_REGISTRIES=package.module:attribute``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

from jobs_core import Registry

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
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:  # the module is there but one of its imports is not
                raise
            continue  # not installed in this environment
        registry = getattr(module, "registry", None)
        if isinstance(registry, Registry):
            registries.append(registry)
    return registries


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


def worker_registry(demo_types: bool, extra: Sequence[str | Registry] = ()) -> Registry:
    """The registry a worker runs: the modules', the demo types if asked, and ``extra``
    (registries, or ``module:attribute`` paths to load)."""
    loaded = [item if isinstance(item, Registry) else load_registry(item) for item in extra]
    return compose([*module_registries(demo_types), *loaded])
