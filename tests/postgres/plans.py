"""Both plans of a worker statement, for the plan tests (bench/NOTES.md §2 and §9).

The sessions of the worker's job store set ``plan_cache_mode = force_generic_plan``
(``jobs_postgres.database.STORE_SESSION_SETTINGS``): psycopg prepares a statement on the
server from its fifth execution, and from then on every execution reuses one plan made without
the parameters' values. A plan test must therefore read that *generic* plan as well as the plan
made for one set of values (what the first executions run): :func:`plans` gives both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from psycopg import sql as pgsql
from sqlalchemy import Engine

HISTORY = 1_000_000
"""The finished jobs of the ``history_url`` fixture's database (tests/postgres/conftest.py)."""

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _explain(engine: Engine, statement: str, params: Mapping[str, Any], setup: str) -> str:
    with engine.connect() as conn, conn.begin() as tx:
        driver = conn.connection.driver_connection
        assert driver is not None
        if setup:
            driver.execute(setup)
        rows = driver.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {statement}", params).fetchall()
        tx.rollback()
    return "\n".join(row[0] for row in rows)


def generic_plan(engine: Engine, statement: str, params: Mapping[str, Any], setup: str = "") -> str:
    """The executed plan of ``statement`` (psycopg syntax) prepared on the server and planned
    without its parameters' values, as the worker's sessions run it; rolled back."""
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    prepared = _PLACEHOLDER.sub(numbered, statement)
    # EXECUTE takes its arguments as literals (a utility statement has no bound parameters)
    arguments = pgsql.SQL(", ").join(pgsql.Literal(params[name]) for name in names)
    explain = pgsql.SQL("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE planned({})").format(arguments)
    with engine.connect() as conn, conn.begin() as tx:
        driver = conn.connection.driver_connection
        assert driver is not None
        mode = driver.execute("SHOW plan_cache_mode").fetchone()
        assert mode is not None
        assert mode[0] == "force_generic_plan", "a worker session's engine is needed"
        if setup:
            driver.execute(setup)
        driver.execute(f"PREPARE planned AS {prepared}")
        rows = driver.execute(explain).fetchall()
        tx.rollback()
        driver.execute("DEALLOCATE planned")  # a session's, not the transaction's
    return "\n".join(row[0] for row in rows)


def plans(
    engine: Engine, statement: str, params: Mapping[str, Any], setup: str = ""
) -> dict[str, str]:
    """``{"custom": ..., "generic": ...}``: the plan for these values, and the one every
    later execution of a worker's session reuses."""
    return {
        "custom": _explain(engine, statement, params, setup),
        "generic": generic_plan(engine, statement, params, setup),
    }


def index_rows_read(plan: str) -> float:
    """The rows all index scans of an executed plan returned (rows x loops, summed)."""
    total = 0.0
    for line in plan.splitlines():
        if "Index" in line and "Scan" in line and "actual" in line:
            found = re.search(r"rows=([0-9.]+) loops=([0-9]+)", line)
            assert found is not None, line
            total += float(found.group(1)) * int(found.group(2))
    return total
