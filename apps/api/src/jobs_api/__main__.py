"""``python -m jobs_api [--host H] [--port P] [--registry module:attribute ...]``.

The ``jobs api`` command is the usual way to start the API (it adds the modules it ships);
this entry point serves the registries named on the command line, plus the demo types
(``jobs_worker.demo:registry``) when ``JOBS_DEMO_TYPES=1`` (enqueueable over HTTP only with the
development flag ``JOBS_DEMO_OVER_HTTP=1``). They are imported by name, so the API
package never depends on the packages that define job types.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from jobs_core import Registry

from jobs_api.app import serve
from jobs_api.containers import build_container
from jobs_api.settings import ApiSettings

DEMO_REGISTRY = "jobs_worker.demo:registry"
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
    settings: ApiSettings, specs: list[str]
) -> tuple[list[Registry], list[Registry]]:
    """The registries to serve and the development ones (the demo types): those named by
    ``specs``, the demo types when ``JOBS_DEMO_TYPES`` is on, and the manifest types of
    ``JOBS_HANDLERS_DIR`` (a manifest whose id is already a type is refused, as in the worker)."""
    registries = [load_registry(spec) for spec in specs]
    demo = [load_registry(DEMO_REGISTRY)] if settings.demo_types else []
    if settings.handlers_dir is not None:
        module_name, _, attribute = HANDLERS_LOADER.partition(":")
        load_handlers = getattr(importlib.import_module(module_name), attribute)
        taken = [name for registry in (*registries, *demo) for name in registry.names()]
        handlers = load_handlers(settings.handlers_dir, taken=taken)
        if not isinstance(handlers, Registry):
            raise TypeError(f"{HANDLERS_LOADER} gave a {type(handlers).__name__}, not a Registry")
        registries.append(handlers)
    return registries, demo


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
        registries, demo = served_registries(settings, args.registry)
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        parser.error(str(error))
    serve(build_container(settings, registries, development=demo), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
