"""The module's declaration: what every deployable (worker, API, CLI) loads.

The package's ``pyproject.toml`` names it in the ``jobs.modules`` entry-point group, so an
environment where the package is installed serves the link checker with no other change:
``jobs migrate`` runs its chain, workers run its job types, the API mounts its routes.

This file is imported by every deployable at start: it stays cheap (no httpx, no FastAPI, no
SQLAlchemy here); the builders import what they need when they are called.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobs_core import Registry
from jobs_core.modules import Module, ModuleContext, RouteContext


def _registry(ctx: ModuleContext) -> Registry:
    from jobs_linkcheck.jobs import build_registry

    return build_registry(ctx)


def _routers(ctx: RouteContext) -> Sequence[object]:
    from jobs_linkcheck.api import routers

    return routers(ctx)


module = Module(
    name="linkcheck",
    build_registry=_registry,
    migrations="jobs_linkcheck.migrations",
    routers=_routers,
    description="A small link checker: crawls a site and records every page's status.",
)
