"""The Imports module's job types, bound to a database: ``import_csv``, ``import_api`` and
``map_reconcile``.

The handlers need an engine and the data directory, so the registry is *built*, never a
module-level global: a deployable (worker, API, CLI) calls :func:`build_registry` with its own
engine and data directory, and includes the result in its registry. Nothing connects at import
time.

- ``import_csv`` — ``dedup_scope='active'`` (never two runs of one import), key
  ``import_csv:<import_id>``, payload ``{import_id, site_target_id}``; a lost database
  connection re-queues it with backoff (it resumes from its checkpoint); ``on_fail`` and
  ``on_cancel`` mark the import failed or cancelled.
- ``import_api`` — ``dedup_scope='active'``, key ``import_api:<import_id>``, payload
  ``{import_id, site_target_id}``; at most one running per site target (concurrency key
  ``site_target_id``, limit 1); the source down (5xx, timeout) or the database lost re-queue it
  with backoff, up to 5 attempts, resuming from its checkpointed cursor; a 429 / 503 with
  ``Retry-After`` snoozes it (no attempt spent); the same end hooks as ``import_csv``.
- ``map_reconcile`` — ``dedup_scope='queue'`` (zero lost wake-up), key
  ``map_reconcile:<site_target_id>``, payload ``{site_target_id}``; ``protected``: its rows are
  the Imports tab's events, never purged and never deletable.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs_core import (
    Clock,
    DedupScope,
    JobContext,
    JobType,
    PayloadInvalid,
    Registry,
    RetryPolicy,
    StoreUnavailable,
    exponential,
)
from jobs_postgres.errors import unavailable_as_store_error
from sqlalchemy import Engine

from jobs_imports.api_client import ApiSettings, SourceUnavailable
from jobs_imports.api_import import ApiImporter
from jobs_imports.api_sources import IMPORT_API
from jobs_imports.importer import CsvImporter, mark_import_cancelled, mark_import_failed
from jobs_imports.reconcile import RECONCILE, map_rows
from jobs_imports.service import IMPORT_CSV, ImportsService

__all__ = [
    "IMPORT_API",
    "IMPORT_CSV",
    "RECONCILE",
    "ImportsModule",
    "UuidFields",
    "batch_size_from_environment",
    "build_module",
    "build_registry",
]

_RETRY_ON_OUTAGE = RetryPolicy(retry_on=(StoreUnavailable,), backoff=exponential(2.0, 2.0, 60.0))
_RETRY_API = RetryPolicy(
    retry_on=(StoreUnavailable, SourceUnavailable), backoff=exponential(5.0, 3.0, 600.0)
)
API_MAX_ATTEMPTS = 5


class UuidFields:
    """A payload schema: these top-level keys, each a UUID (as a string), and nothing else."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def validate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The payload with canonical UUID strings, or :class:`PayloadInvalid`."""
        errors: list[dict[str, Any]] = []
        clean: dict[str, Any] = {}
        for name in self.names:
            value = payload.get(name)
            try:
                clean[name] = str(uuid.UUID(str(value)))
            except ValueError:
                errors.append({"loc": ["payload", name], "msg": f"{name} must be a UUID"})
        errors.extend(
            {"loc": ["payload", extra], "msg": "unexpected field"}
            for extra in payload
            if extra not in self.names
        )
        if errors:
            raise PayloadInvalid(errors)
        return clean

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the payload."""
        return {
            "type": "object",
            "properties": {name: {"type": "string", "format": "uuid"} for name in self.names},
            "required": list(self.names),
            "additionalProperties": False,
        }


@dataclass(frozen=True, slots=True)
class ImportsModule:
    """The module bound to a database: its use cases and its job types, sharing one service."""

    service: ImportsService
    registry: Registry


def build_module(
    engine: Engine,
    data_dir: Path,
    *,
    clock: Clock | None = None,
    batch_size: int = 5000,
    max_upload_bytes: int | None = None,
    allow_private_urls: bool = False,
    api_settings: ApiSettings | None = None,
    api_retry: RetryPolicy = _RETRY_API,
) -> ImportsModule:
    """The module's use cases and registry, bound to ``engine`` and ``data_dir``.

    ``data_dir`` is where uploads are stored (``<data_dir>/imports/…``): the API that receives
    files and the workers that import them must share it. ``allow_private_urls`` lets site
    targets, pages and API sources name non-public hosts (development only:
    :mod:`jobs_imports.hosts`). ``api_settings``: the limits of ``import_api``
    (``JOBS_IMPORTS_API_*``); ``api_retry``: its retry policy (a test shortens the backoff).
    """
    registry = Registry("imports")
    options: dict[str, Any] = {"clock": clock, "allow_private_urls": allow_private_urls}
    if max_upload_bytes is not None:
        options["max_upload_bytes"] = max_upload_bytes
    service = ImportsService(engine, Path(data_dir), registry, **options)
    importer = CsvImporter(service, batch_size=batch_size)

    def map_reconcile(ctx: JobContext) -> dict[str, Any]:
        site_target_id = uuid.UUID(str(ctx.payload["site_target_id"]))
        with unavailable_as_store_error(), engine.begin() as conn:
            # the target must be the job's org's: a payload never reaches across orgs
            service.site_target_in(conn, ctx.job.org_id, site_target_id)
            return {"mapped": map_rows(conn, site_target_id)}

    registry.register(
        JobType(
            name=IMPORT_CSV,
            handler=importer,
            dedup_scope=DedupScope.ACTIVE,
            on_fail=lambda job: mark_import_failed(service, job),
            on_cancel=lambda job: mark_import_cancelled(service, job),
            payload_schema=UuidFields("import_id", "site_target_id"),
            retry=_RETRY_ON_OUTAGE,
            description="Import an uploaded search-analytics CSV into the site target's rows.",
        )
    )
    registry.register(
        JobType(
            name=IMPORT_API,
            handler=ApiImporter(importer, api_settings),
            dedup_scope=DedupScope.ACTIVE,
            dedup_key="import_api:{import_id}",
            concurrency_key="site_target_id",
            concurrency_limit=1,
            max_attempts=API_MAX_ATTEMPTS,
            on_fail=lambda job: mark_import_failed(service, job),
            on_cancel=lambda job: mark_import_cancelled(service, job),
            payload_schema=UuidFields("import_id", "site_target_id"),
            retry=api_retry,
            description="Import a date range of search-analytics rows from the site target's "
            "API source.",
        )
    )
    registry.register(
        JobType(
            name=RECONCILE,
            handler=map_reconcile,
            dedup_scope=DedupScope.QUEUE,
            payload_schema=UuidFields("site_target_id"),
            retry=_RETRY_ON_OUTAGE,
            protected=True,
            description="Map the site target's unmapped imported rows to its pages.",
        )
    )
    return ImportsModule(service=service, registry=registry)


BATCH_SIZE_VARIABLE = "JOBS_IMPORTS_BATCH_SIZE"
DEFAULT_BATCH_SIZE = 5000


def batch_size_from_environment(environ: Mapping[str, str] | None = None) -> int:
    """Rows per transaction of ``import_csv``: ``JOBS_IMPORTS_BATCH_SIZE`` of ``environ`` (the
    process's by default; a module context's settings), default 5000.

    Raises ``ValueError`` naming the variable when it is not a positive integer.
    """
    text = (os.environ if environ is None else environ).get(BATCH_SIZE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_BATCH_SIZE
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{BATCH_SIZE_VARIABLE}: not a positive integer: {text!r}")
    return value


def build_registry(
    engine: Engine,
    data_dir: Path,
    *,
    clock: Clock | None = None,
    batch_size: int | None = None,
    api_settings: ApiSettings | None = None,
) -> Registry:
    """The module's registry (``import_csv``, ``import_api``, ``map_reconcile``) bound to
    ``engine`` and ``data_dir``: what a worker includes (``batch_size`` default: the
    environment's, :func:`batch_size_from_environment`; ``api_settings``: the environment's
    ``JOBS_IMPORTS_API_*``)."""
    if batch_size is None:
        batch_size = batch_size_from_environment()
    if api_settings is None:
        api_settings = ApiSettings.from_settings(os.environ)
    return build_module(
        engine, data_dir, clock=clock, batch_size=batch_size, api_settings=api_settings
    ).registry
