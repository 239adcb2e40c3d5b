"""The module's own chain: its own version table, and a database that matches the tables
module (a migration that forgets a column, an index or a constraint fails here)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from jobs_linkcheck.tables import metadata
from sqlalchemy import Engine

pytestmark = pytest.mark.postgres

TABLES = {"linkcheck_crawls", "linkcheck_results"}


def _ours(name: str | None, type_: str, parents: Mapping[str, str | None]) -> bool:
    """Compare the module's tables only: the jobs chain's are not its business."""
    if type_ == "table":
        return name in TABLES
    return parents.get("table_name") in TABLES | {None}


def test_the_chain_has_its_own_version_table(engine: Engine) -> None:
    with engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT version_num FROM alembic_version_linkcheck")) == (
            "0001_linkcheck"
        )
        tables = set(sa.inspect(conn).get_table_names())
    assert TABLES | {"jobs", "alembic_version_linkcheck"} <= tables


def test_the_migrated_database_matches_the_tables_module(engine: Engine) -> None:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_name": _ours}
        )
        assert compare_metadata(context, metadata) == []
