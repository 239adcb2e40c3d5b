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


def load_registry(spec: str) -> Registry:
    """The :class:`Registry` named by ``module:attribute``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--registry {spec!r}: expected module:attribute")
    registry = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(registry, Registry):
        raise TypeError(f"--registry {spec!r} is a {type(registry).__name__}, not a Registry")
    return registry


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
        registries = [load_registry(spec) for spec in args.registry]
        demo = [load_registry(DEMO_REGISTRY)] if settings.demo_types else []
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        parser.error(str(error))
    serve(build_container(settings, registries, development=demo), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
