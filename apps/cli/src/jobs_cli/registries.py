"""The job types the CLI serves and accepts, and the modules it loads.

Everything goes through :func:`jobs_worker.registries.load_modules` (the ``jobs.modules`` entry
points, or ``JOBS_MODULES``; decision 0024), the loader the worker and the API call too: ``jobs
enqueue`` accepts the types of exactly the modules a worker serves. A module's registry is built
with a :class:`~jobs_core.modules.ModuleContext` on the command's engine (the embedded server's
too); ``JOBS_EXTRA_REGISTRIES`` (compatibility: plain registries) are added besides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs_core import DuplicateJobType, Registry

from jobs_cli.errors import UsageError
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from jobs_core.modules import Module, ModuleContext
    from sqlalchemy import Engine


def modules(settings: CliSettings) -> list[Module]:
    """The modules this deployment loads (a module that cannot be loaded is a usage error)."""
    from jobs_worker.registries import ModuleError, load_modules

    try:
        return load_modules(settings.demo_types)
    except ModuleError as exc:
        raise UsageError(str(exc)) from None


def module_context(settings: CliSettings, engine: Engine | None) -> ModuleContext:
    """What a module's builders get from the CLI: ``engine`` (the command's), the data
    directory, the ``JOBS_*`` settings."""
    from jobs_core.modules import ModuleContext
    from jobs_postgres.modules import module_settings

    url = engine.url.render_as_string(hide_password=False) if engine is not None else None
    return ModuleContext(
        engine=engine, database_url=url, data_dir=settings.data_dir, settings=module_settings()
    )


def build_registry(
    settings: CliSettings, engine: Engine | None = None, *, with_modules: bool = True
) -> Registry:
    """One registry of every enabled type: the modules' (with ``engine``, those that own tables
    too), the extra registries and the manifest types; ``with_modules=False`` leaves the modules
    out (``jobs api`` gives them to the API, which builds them on its own engine)."""
    from jobs_worker.registries import ModuleError, RegistryLoadError, worker_registry

    loaded = modules(settings) if with_modules else []
    try:
        return worker_registry(
            settings.demo_types,
            list(settings.extra_registries),
            handlers_dir=settings.handlers_dir,
            context=module_context(settings, engine),
            modules=loaded,
        )
    except RegistryLoadError as exc:
        raise UsageError(f"JOBS_EXTRA_REGISTRIES: {exc}") from None
    except (ModuleError, DuplicateJobType) as exc:
        raise UsageError(str(exc)) from None
