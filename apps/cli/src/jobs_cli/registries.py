"""The job types the CLI's deployables serve: the modules' registries, plus the demo types."""

from __future__ import annotations

from jobs_core import Registry


def module_registries(demo_types: bool) -> list[Registry]:
    """The registries of the modules this distribution ships (and the demo types if asked)."""
    from jobs_worker.registries import module_registries as worker_registries

    return list(worker_registries(demo_types))


def build_registry(demo_types: bool) -> Registry:
    """One registry of every enabled type: what ``jobs enqueue`` accepts."""
    registry = Registry("cli")
    for module in module_registries(demo_types):
        registry.include(module)
    return registry
