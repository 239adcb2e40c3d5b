"""``python -m jobs_api [--host H] [--port P] [--registry module:attribute ...]``.

The ``jobs api`` command is the usual way to start the API; this entry point serves the same
modules (:func:`jobs_core.modules.discover`: the ``jobs.modules`` entry points, or
``JOBS_MODULES``; the demo types, a development module, when ``JOBS_DEMO_TYPES=1``, enqueueable
over HTTP only with the development flag ``JOBS_DEMO_OVER_HTTP=1``), plus the registries named on
the command line. Modules are found by entry point, so the API package never depends on the
packages that define job types.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from jobs_core import Registry
from jobs_core.modules import Module, ModuleContext, compose_modules, discover, selection_from

from jobs_api.app import serve
from jobs_api.containers import build_container
from jobs_api.settings import ApiSettings

HANDLERS_LOADER = "jobs_worker.manifests:load_handlers"


def load_registry(spec: str) -> Registry:
    """The :class:`Registry` named by ``module:attribute``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--registry {spec!r}: expected module:attribute")
    registry = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(registry, Registry):
        raise TypeError(f"--registry {spec!r} is a {type(registry).__name__}, not a Registry")
    return registry


def served_registries(
    settings: ApiSettings, specs: list[str], environ: Mapping[str, str] | None = None
) -> tuple[list[Registry], list[Module]]:
    """The registries and the modules to serve: the registries named by ``specs`` and the
    manifest types of ``JOBS_HANDLERS_DIR`` (a manifest whose id is already a type is refused,
    as in the worker); the modules of :func:`jobs_core.modules.discover` (``JOBS_MODULES`` of
    ``environ``; the development ones with ``JOBS_DEMO_TYPES``)."""
    source = os.environ if environ is None else environ
    modules = discover(selection_from(source), development=settings.demo_types)
    registries = [load_registry(spec) for spec in specs]
    if settings.handlers_dir is not None:
        module_name, _, attribute = HANDLERS_LOADER.partition(":")
        load_handlers = getattr(importlib.import_module(module_name), attribute)
        without_database = ModuleContext(engine=None, database_url=None, data_dir=Path("."))
        of_modules, _ = compose_modules(modules, without_database)
        taken = [name for registry in (*registries, of_modules) for name in registry.names()]
        handlers = load_handlers(settings.handlers_dir, taken=taken)
        if not isinstance(handlers, Registry):
            raise TypeError(f"{HANDLERS_LOADER} gave a {type(handlers).__name__}, not a Registry")
        registries.append(handlers)
    return registries, modules


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve until stopped."""
    settings = ApiSettings()
    parser = argparse.ArgumentParser(prog="python -m jobs_api", description=__doc__)
    parser.add_argument("--host", default=settings.api_host)
    parser.add_argument("--port", type=int, default=settings.api_port)
    parser.add_argument(
        "--registry",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="a job type registry to serve (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        registries, modules = served_registries(settings, args.registry)
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        parser.error(str(error))
    serve(build_container(settings, registries, modules), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
