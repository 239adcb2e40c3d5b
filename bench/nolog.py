"""The drain without the event log, for the ``off`` side of an A/B (a benchmark instrument only).

Since migration 0009 the claim and the finish write their own rows of ``job_events`` in a CTE of
the same statement (``jobs_postgres.sql._logged``), so disabling the log's triggers no longer
turns the event machinery off for a drain. A benchmark worker started with ``JOBS_BENCH_NO_LOG=1``
loads ``jobs_postgres.sql`` with ``_logged`` rewritten to build a CTE that inserts nothing
(``<name> AS (SELECT NULL)``): every statement keeps its shape, and no event row is written.
With the triggers disabled as well (``ALTER TABLE jobs DISABLE TRIGGER USER``, which ``bench.run``
does to every database it creates under ``JOBS_BENCH_NO_LOG=1``) the drain, the enqueues and the
latency are those of the code without issue 13's log, on the same tree and in the same run
(``bench.flow ab --variant nolog:JOBS_BENCH_NO_LOG=1``).

The rewrite is of the module's syntax tree when it is imported; if ``_logged`` is not found or
the module was already imported, the worker refuses to start (no silent "on" measured as
"off").
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

NO_LOG_ENV = "JOBS_BENCH_NO_LOG"
TARGET = "jobs_postgres.sql"
FUNCTION = "_logged"


class _NoLogLoader(importlib.machinery.SourceFileLoader):
    """Loads ``jobs_postgres.sql`` with ``_logged`` returning a CTE that inserts nothing (from
    the source every time: the cached bytecode is the module as written)."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        tree = ast.parse(self.get_data(path), filename=path)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
                node.body = ast.parse('return f"{name} AS (SELECT NULL)"').body
                break
        else:
            raise RuntimeError(f"bench.nolog: no function {FUNCTION} in {path}")
        return compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.origin is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, spec.origin, loader=_NoLogLoader(fullname, spec.origin)
        )


def asked() -> bool:
    """True when this run measures without the event log (``JOBS_BENCH_NO_LOG=1``)."""
    return os.environ.get(NO_LOG_ENV) == "1"


def disable_triggers(url: str) -> None:
    """Turn the log's triggers of ``jobs`` off in the database at ``url`` (enqueues, updates
    and deletes then write no event row)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")


def install_if_asked() -> bool:
    """Install the rewrite when ``JOBS_BENCH_NO_LOG=1``; True if installed."""
    if not asked():
        return False
    if TARGET in sys.modules:
        raise RuntimeError(f"bench.nolog: {TARGET} was imported before the rewrite was installed")
    sys.meta_path.insert(0, _Finder())
    return True
