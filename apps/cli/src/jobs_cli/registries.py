"""The job types the CLI serves and accepts.

- ``jobs_worker.registries`` owns the list of registries that need nothing but an import: the
  demo types and a deployment's ``JOBS_EXTRA_REGISTRIES``;
- the shipped modules whose handlers need the database (``jobs_imports``) are built here, on
  an engine, for what the CLI itself composes: ``jobs api`` serves their routes
  (``shipped_modules``), ``jobs enqueue`` accepts their types. ``jobs worker`` leaves them to
  the worker, which builds them the same way (``jobs_worker.registries.shipped_registries``).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from jobs_core import Registry

from jobs_cli.errors import UsageError
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from sqlalchemy import Engine

IMPORTS_MODULE = "jobs_imports"


def shipped_modules() -> list[str]:
    """The domain modules installed with this distribution (what ``jobs api`` serves)."""
    return [IMPORTS_MODULE] if importlib.util.find_spec(IMPORTS_MODULE) is not None else []


def database_registries(settings: CliSettings, engine: Engine) -> list[Registry]:
    """The registries of the shipped modules whose handlers use ``engine``."""
    if IMPORTS_MODULE not in shipped_modules():
        return []
    from jobs_imports.registry import build_registry as imports_registry

    return [imports_registry(engine, settings.data_dir)]


def build_registry(settings: CliSettings, engine: Engine | None = None) -> Registry:
    """One registry of every enabled type; with ``engine``, the shipped modules' types too."""
    from jobs_worker.registries import RegistryLoadError, worker_registry

    extra: list[str | Registry] = list(settings.extra_registries)
    if engine is not None:
        extra.extend(database_registries(settings, engine))
    try:
        return worker_registry(settings.demo_types, extra, handlers_dir=settings.handlers_dir)
    except RegistryLoadError as exc:
        raise UsageError(f"JOBS_EXTRA_REGISTRIES: {exc}") from None
