"""The Imports module: CSV imports with DuckDB, API imports with httpx, and map_reconcile.

A domain module of jobs: it owns its tables (its own Alembic chain, :mod:`jobs_imports.migrations`)
and registers three job types. It declares itself to the deployables through
:data:`jobs_imports.module.module` (entry point ``imports`` of group ``jobs.modules``, decision
0024); its handlers need a database, so the deployables build them with their engine:

- :func:`build_registry` ``(engine, data_dir)`` → the :class:`jobs_core.Registry` to include in a
  worker's (``import_csv``, ``import_api``, ``map_reconcile``);
- :func:`build_module` ``(engine, data_dir)`` → the same registry plus the
  :class:`~jobs_imports.service.ImportsService` an API or a CLI calls;
- :func:`jobs_imports.migrations.upgrade` ``(url)`` after the jobs chain;
- :func:`jobs_imports.api.build_router` for the HTTP routes.

Importing this package is cheap and connects to nothing: the names above load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs_core.lazy import lazy_names

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule, build_module, build_registry
    from jobs_imports.urls import normalize_url

__all__ = ["ImportsModule", "build_module", "build_registry", "normalize_url"]

_LAZY = {
    "ImportsModule": "jobs_imports.registry",
    "build_module": "jobs_imports.registry",
    "build_registry": "jobs_imports.registry",
    "normalize_url": "jobs_imports.urls",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())
