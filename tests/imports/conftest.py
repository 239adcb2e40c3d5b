"""Fixtures of the Imports tests: the module's tables on the session's PostgreSQL, emptied per test.

``imports_engine`` is the root ``pg_engine`` (``jobs`` emptied) with the Imports chain migrated
once per session and its tables emptied per test; ``module`` is the module built on it, with a
data directory of the test's own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.imports.helpers import IMPORTS_TABLES, ORG, ORG_B
from tests.pooling import empty_tables

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import SiteTarget
    from sqlalchemy import Engine


@pytest.fixture(scope="session")
def imports_url(pg_url: str) -> str:
    """The session database, with the Imports chain applied after the jobs chain."""
    from jobs_imports import migrations

    migrations.upgrade(pg_url)
    return pg_url


@pytest.fixture
def imports_engine(imports_url: str, pg_engine: Engine) -> Engine:
    """An engine on the session database whose jobs and Imports tables are empty."""

    with pg_engine.begin() as conn:
        empty_tables(conn, IMPORTS_TABLES)  # the jobs' tables: emptied by pg_engine
    return pg_engine


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """The data directory uploads are stored under: a directory of the test's own, not under
    pytest's shared tmp root (concurrent sessions on the machine prune it)."""
    with tempfile.TemporaryDirectory(prefix="jobs-imports-data-") as path:
        yield Path(path)


@pytest.fixture
def module(imports_engine: Engine, data_dir: Path) -> ImportsModule:
    """The Imports module on the test database (small batches: several per fixture file)."""
    from jobs_imports.registry import build_module

    return build_module(imports_engine, data_dir, batch_size=3)


@pytest.fixture
def target(module: ImportsModule) -> SiteTarget:
    """A site target of ``ORG``."""
    return module.service.create_site_target(ORG, "Example", "https://www.example.com")


@pytest.fixture
def target_b(module: ImportsModule) -> SiteTarget:
    """A site target of ``ORG_B``."""
    return module.service.create_site_target(ORG_B, "Other", "https://other.example.org")
