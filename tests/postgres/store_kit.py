"""Helpers of the PostgreSQL store's tests: statement counters (SQLAlchemy's and the driver's) and a
quick enqueue of N jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
import pytest
from jobs_core import (
    NewJob,
)
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, event

ORG = "org-a"


class StatementCounter:
    """Counts the statements an engine sends (pool pings are not statements of the store)."""

    def __init__(self, engine: Engine) -> None:
        self.statements: list[str] = []
        self._engine = engine

    def __enter__(self) -> StatementCounter:
        event.listen(self._engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self._engine, "before_cursor_execute", self._record)

    def _record(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)


class DriverStatementCounter:
    """Counts the statements psycopg sends in this process: the worker's hot statements run on
    the psycopg connection itself, out of SQLAlchemy's sight (a spy around
    ``psycopg.Cursor.execute``, which SQLAlchemy's executions go through too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: list[str] = []
        original = psycopg.Cursor.execute

        def execute(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            self.statements.append(str(query))
            return original(cursor, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)


def enqueue_n(store: PostgresJobStore, n: int, now: datetime, type_name: str = "reconcile") -> None:
    store.insert_many([NewJob(ORG, type_name, {"i": i}) for i in range(n)], now)
