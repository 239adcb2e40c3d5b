"""The Imports chain: its own version table after the jobs chain, a clean round trip, and a
migrated database that matches the tables module."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from jobs_imports import migrations
from jobs_imports.tables import metadata
from jobs_postgres import migrations as jobs_migrations
from jobs_postgres.database import create_engine, drop_database, ensure_database, with_database
from sqlalchemy import Engine, inspect

pytestmark = pytest.mark.postgres

IMPORTS_TABLES = {"site_targets", "pages", "imports", "import_rows", "import_api_sources"}


@pytest.fixture
def scratch_url(pg_server: str) -> Iterator[str]:
    """A new, empty database of this test, dropped after it."""
    name = f"jobs_imports_scratch_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(pg_server, name)
    try:
        yield with_database(pg_server, name)
    finally:
        drop_database(pg_server, name)


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_the_chain_runs_after_the_jobs_chain_and_round_trips(scratch_url: str) -> None:
    jobs_migrations.upgrade(scratch_url)
    assert migrations.current(scratch_url) is None
    migrations.upgrade(scratch_url)
    assert migrations.current(scratch_url) == "0003_imports"
    assert jobs_migrations.current(scratch_url) == jobs_migrations.head()  # untouched
    assert IMPORTS_TABLES | {"alembic_version_imports", "jobs"} <= _tables(scratch_url)
    migrations.upgrade(scratch_url)  # idempotent

    migrations.downgrade(scratch_url, "0001_imports")  # the first revision's status check back
    assert migrations.current(scratch_url) == "0001_imports"
    migrations.downgrade(scratch_url)
    assert migrations.current(scratch_url) is None
    assert not IMPORTS_TABLES & _tables(scratch_url)
    assert "jobs" in _tables(scratch_url)  # the jobs chain's tables stay
    migrations.upgrade(scratch_url)
    assert _tables(scratch_url) >= IMPORTS_TABLES


def _ours(name: str | None, type_: str, parents: Mapping[str, str | None]) -> bool:
    """Compare this module's tables (and what hangs on them) only: the other chains' tables
    are not its business."""
    if type_ == "table":
        return name in IMPORTS_TABLES
    return parents.get("table_name") in IMPORTS_TABLES | {None}


def test_the_migrated_database_matches_the_tables_module(imports_engine: Engine) -> None:
    with imports_engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_name": _ours}
        )
        assert compare_metadata(context, metadata) == []
        unmapped = {i["name"]: i for i in inspect(conn).get_indexes("import_rows")}[
            "import_rows_unmapped_idx"
        ]
        assert unmapped["column_names"] == ["site_target_id", "normalized_url"]
        assert "page_id IS NULL" in unmapped["dialect_options"]["postgresql_where"]
