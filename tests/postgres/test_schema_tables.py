"""The list of tables every PostgreSQL test empties covers every table that holds state: a table
left out carries one test's rows into the next (a schedule left by one test fired jobs into the
next one's worker process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text

from tests.pooling import TABLES

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres

#: made once by the migrations and never written by a test
_KEPT = {"alembic_version_jobs", "job_events_state"}


def test_every_table_with_state_is_emptied_before_each_test(pg_engine: Engine) -> None:
    with pg_engine.connect() as conn:
        names = set(
            conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            ).scalars()
        )
    emptied = {name.strip() for name in TABLES.split(",")}
    assert names - _KEPT == emptied
