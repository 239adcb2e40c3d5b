"""Fixtures of the ``import_api`` tests: a fake source, and the module allowed to reach it
(127.0.0.1 is a private host) with short timeouts and an immediate retry."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jobs_core import Job, RetryPolicy, StoreUnavailable, constant
from jobs_imports.api_client import ApiSettings, SourceUnavailable
from jobs_imports.api_sources import ApiSources
from jobs_imports.registry import build_module

from tests.imports.fake_source import TOKEN, FakeSource, fake_source, search_rows
from tests.imports.helpers import ORG, job_of, rows_of

if TYPE_CHECKING:
    from datetime import date

    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import ImportView, SiteTarget
    from sqlalchemy import Engine

SETTINGS = ApiSettings(timeout_s=5, page_deadline_s=10, max_page_bytes=256 * 1024)
RETRY_AT_ONCE = RetryPolicy(retry_on=(StoreUnavailable, SourceUnavailable), backoff=constant(0))


@pytest.fixture(name="source")
def source_fixture() -> Iterator[FakeSource]:
    """A source of 10 rows in pages of 3 (4 pages), one row with clicks that are not a number."""
    yield from fake_source(search_rows(10, bad_every=7), page_size=3)


@pytest.fixture(name="api_module")
def api_module_fixture(imports_engine: Engine, data_dir: Path) -> ImportsModule:
    """The module with API sources on 127.0.0.1 allowed, short limits, retries at once."""
    return build_module(
        imports_engine,
        data_dir,
        batch_size=3,
        allow_private_urls=True,
        api_settings=SETTINGS,
        api_retry=RETRY_AT_ONCE,
    )


@pytest.fixture(name="api_target")
def api_target_fixture(api_module: ImportsModule, source: FakeSource) -> SiteTarget:
    """A site target of ``ORG`` whose API source is the fake one."""
    target = api_module.service.create_site_target(ORG, "Example", "https://www.example.com")
    ApiSources(api_module.service).configure(ORG, target.id, source.url, TOKEN)
    return target


def start(
    module: ImportsModule, target: SiteTarget, first: date, last: date | None = None
) -> ImportView:
    """Start an API import of ``first``..``last`` (one day by default)."""
    return ApiSources(module.service).start_import(ORG, target.id, first, last or first)


def job_id(view: ImportView) -> uuid.UUID:
    assert view.job is not None
    return view.job.id


def current(module: ImportsModule, view: ImportView) -> Job:
    return job_of(module, ORG, job_id(view))


def rows_without_ids(module: ImportsModule, import_id: uuid.UUID) -> list[tuple[Any, ...]]:
    """The imported rows without their line number (an API row has no file line)."""
    return [row[1:] for row in rows_of(module, import_id)]


def figures(module: ImportsModule, import_id: uuid.UUID) -> tuple[Any, ...]:
    """Status, report (without the reconcile job's id) and rows of an import."""
    view = module.service.get_import(ORG, import_id)
    report = dict(view.record.report or {})
    report.pop("reconcile_job_id", None)
    return view.status, report, rows_of(module, import_id)
