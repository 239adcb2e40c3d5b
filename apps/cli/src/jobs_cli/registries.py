"""The job types the CLI serves and accepts: the list the worker, the API and the CLI share.

``jobs_worker.registries`` owns that list (the shipped modules, the demo types, and a
deployment's ``JOBS_EXTRA_REGISTRIES``); the CLI only passes its settings.
"""

from __future__ import annotations

from jobs_core import Registry

from jobs_cli.errors import UsageError
from jobs_cli.settings import CliSettings


def build_registry(settings: CliSettings) -> Registry:
    """One registry of every enabled type: what ``jobs enqueue`` accepts and ``jobs api``
    serves."""
    from jobs_worker.registries import RegistryLoadError, worker_registry

    try:
        return worker_registry(settings.demo_types, settings.extra_registries)
    except RegistryLoadError as exc:
        raise UsageError(f"JOBS_EXTRA_REGISTRIES: {exc}") from None
