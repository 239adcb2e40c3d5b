"""The Imports module's declaration (:mod:`jobs_core.modules`), named in this package's
``pyproject.toml`` under the ``jobs.modules`` entry-point group: every deployable finds it there.

Cheap to import: the handlers, the service and the routes load when a builder runs.

- job types: ``import_csv``, ``import_api`` and ``map_reconcile`` on the deployment's engine
  (``JOBS_IMPORTS_BATCH_SIZE``: rows per transaction of ``import_csv``; ``JOBS_IMPORTS_API_*``:
  the timeouts and limits of ``import_api``, :class:`jobs_imports.api_client.ApiSettings`);
- tables: the chain :mod:`jobs_imports.migrations` (version table ``alembic_version_imports``);
- routes: :func:`jobs_imports.api.build_router` (``JOBS_MAX_UPLOAD_BYTES``: the largest upload,
  default 512 MiB; ``JOBS_ALLOW_PRIVATE_URLS``: allow non-public hosts, development only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from jobs_core.modules import Module, ModuleContext, ModuleError, RouteContext

if TYPE_CHECKING:
    from jobs_core import Registry

    from jobs_imports.registry import ImportsModule

__all__ = ["DEFAULT_MAX_UPLOAD_BYTES", "UPLOAD_ENVELOPE_BYTES", "module"]

DEFAULT_MAX_UPLOAD_BYTES = 512 * 1024 * 1024
"""The largest upload when ``JOBS_MAX_UPLOAD_BYTES`` is not set."""
UPLOAD_ENVELOPE_BYTES = 1024 * 1024
"""Room for the multipart envelope (boundaries, part headers, form fields) around an upload."""

_TRUE = {"1", "true", "yes", "on"}


def _engine(ctx: ModuleContext) -> object:
    if ctx.engine is None:
        raise ModuleError("module 'imports' needs a database (its tables live there)")
    return ctx.engine


def max_upload_bytes(settings: Mapping[str, str]) -> int:
    """``JOBS_MAX_UPLOAD_BYTES``, default :data:`DEFAULT_MAX_UPLOAD_BYTES`."""
    text = settings.get("JOBS_MAX_UPLOAD_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_UPLOAD_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ModuleError(f"JOBS_MAX_UPLOAD_BYTES: not a positive integer: {text!r}")
    return value


def _build_registry(ctx: ModuleContext) -> Registry:
    from jobs_imports.api_client import ApiSettings
    from jobs_imports.registry import batch_size_from_environment, build_registry

    try:
        api_settings = ApiSettings.from_settings(ctx.settings)
    except ValueError as error:
        raise ModuleError(str(error)) from None
    return build_registry(
        _engine(ctx),  # type: ignore[arg-type]
        ctx.data_dir,
        clock=ctx.clock,
        batch_size=batch_size_from_environment(ctx.settings),
        api_settings=api_settings,
    )


def build_service_module(ctx: ModuleContext) -> ImportsModule:
    """The module's use cases as the API serves them (upload limit and host policy from
    ``ctx.settings``)."""
    from jobs_imports.registry import build_module

    allow_private = ctx.settings.get("JOBS_ALLOW_PRIVATE_URLS", "").strip().lower() in _TRUE
    return build_module(
        _engine(ctx),  # type: ignore[arg-type]
        ctx.data_dir,
        clock=ctx.clock,
        max_upload_bytes=max_upload_bytes(ctx.settings),
        allow_private_urls=allow_private,
    )


def _routers(ctx: RouteContext) -> Sequence[object]:
    from jobs_imports.api import build_router
    from jobs_imports.service import ImportsService

    service = build_service_module(ctx.module).service

    def imports_service() -> ImportsService:  # a FastAPI dependency without parameters
        return service

    return [build_router(imports_service, ctx.current_org)]


def _body_limits(ctx: ModuleContext) -> Mapping[str, int]:
    from jobs_imports.api import UPLOAD_PATH

    return {UPLOAD_PATH: max_upload_bytes(ctx.settings) + UPLOAD_ENVELOPE_BYTES}


module = Module(
    name="imports",
    build_registry=_build_registry,
    migrations="jobs_imports.migrations",
    routers=_routers,
    body_limits=_body_limits,
    description="CSV and API imports of search analytics, and map_reconcile.",
)
"""The declaration every deployable loads (entry point ``imports``)."""
