"""The connections of the PostgreSQL job store (:class:`StoreConnections`, which
:class:`~jobs_postgres.store.PostgresJobStore` extends): how a statement reaches the server.

- one self-contained statement on an autocommit connection (one round trip), or inside a
  caller's transaction when the store is bound to one (``PostgresJobStore.bound_to``);
- the worker's per-job statements on the pooled psycopg connection itself, without SQLAlchemy's
  execution and result layers (:meth:`StoreConnections._hot_rows`);
- reads and id-carrying inserts retried once on a connection found lost;
- every driver error translated at this boundary (``errors.unavailable_as_store_error``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Connection, Engine, TextClause, exc

from jobs_postgres.errors import unavailable_as_store_error
from jobs_postgres.reads import fetched

T = TypeVar("T")
Execute = Callable[[str, Mapping[str, Any]], Any]
"""Runs one statement (psycopg's ``%(name)s`` syntax); its first row or None."""
Send = Callable[[str, Mapping[str, Any]], Callable[[], list[Any]]]
"""Sends one statement of a pipelined transaction; calling what it returns gives its rows (and
sends, in the same round trip, every statement sent before that has not gone yet)."""


class StoreConnections:
    """The engine, the optional caller's connection, and the ways a statement is run."""

    def __init__(self, engine: Engine, *, connection: Connection | None = None) -> None:
        self._engine = engine
        self._bound = connection
        # One statement per call needs no BEGIN/COMMIT round trips: run it in autocommit.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    @property
    def engine(self) -> Engine:
        """The engine this store runs on."""
        return self._engine

    # -- connections --------------------------------------------------------------------------
    @contextmanager
    def _statement(self) -> Iterator[Connection]:
        """A connection for one self-contained statement."""
        with unavailable_as_store_error():
            if self._bound is not None:
                yield self._bound
            else:
                with self._autocommit.connect() as conn:
                    yield conn

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """A connection in a transaction for a read-lock-write sequence.

        Bound to a caller's connection, the sequence runs in a savepoint, so a refusal (a dedup
        conflict) leaves the caller's transaction usable.
        """
        with unavailable_as_store_error():
            if self._bound is not None:
                with self._bound.begin_nested():
                    yield self._bound
            else:
                with self._engine.begin() as conn:
                    yield conn

    def _rows(self, statement: TextClause, params: Mapping[str, Any]) -> list[Any]:
        with self._statement() as conn:
            return list(conn.execute(statement, params).all())

    def _hot_rows(self, query: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one of the worker's per-job statements (claim, finish; psycopg syntax,
        :mod:`jobs_postgres.claims`), run on the psycopg connection of a pooled connection in
        autocommit: one round trip, without SQLAlchemy's execution and result layers, which
        took half the worker's CPU per job (bench/NOTES.md §3).

        A connection found broken is invalidated (the pool opens a new one), and the error
        is ``StoreUnavailable`` as on every other path. Inside a caller's transaction the
        statement runs on the caller's connection.
        """
        if self._bound is not None:
            bound = self._bound
            with self._statement():
                return all_rows(bound.exec_driver_sql(query, dict(params)))
        with unavailable_as_store_error():
            pooled = self._engine.raw_connection()
            try:
                driver = pooled.driver_connection
                assert isinstance(driver, psycopg.Connection)
                driver.autocommit = True
                try:
                    with driver.cursor() as cursor:
                        cursor.execute(query, params)
                        # every hot statement returns rows (``description`` would build a
                        # Column per column per call: a sixth of the completer's CPU)
                        return cursor.fetchall()
                except psycopg.Error as error:
                    if driver.broken or driver.closed:
                        pooled.invalidate(error)
                    raise
                finally:
                    try:
                        if not (driver.broken or driver.closed):
                            driver.autocommit = False  # as the pool lends it to everyone else
                    except psycopg.Error:
                        # interrupted mid-statement: never pool it in autocommit, a
                        # transaction begun on it later would not be one
                        pooled.invalidate()
            finally:
                pooled.close()

    def _retried(self, run: Callable[[Connection, bool], T]) -> T:
        """``run(connection, retried)`` on an autocommit connection, once more on a fresh one
        if the pooled connection turns out lost (the server dropped it an instant ago, or
        without a word: the checkout check of ``create_engine`` catches the others).

        Only for calls that may run twice: reads, and an insert whose caller-made id tells
        whether the first try committed (``retried`` is then True). Never on a caller's
        connection: its transaction is gone with it.
        """
        if self._bound is not None:
            with unavailable_as_store_error():
                return run(self._bound, False)
        with unavailable_as_store_error():
            conn = self._autocommit.connect()
            try:
                return run(conn, False)
            except exc.DBAPIError as error:
                if not error.connection_invalidated:
                    raise
            finally:
                conn.close()
            with self._autocommit.connect() as conn:
                return run(conn, True)

    def _on_driver(self, run: Callable[[Execute, bool], T]) -> T:
        """``run(execute, retried)``, where ``execute(query, params)`` runs a statement of
        psycopg's syntax and gives its first row: on the pooled psycopg connection itself in
        autocommit (none of SQLAlchemy's execution machinery: for the hottest calls), retried
        as :meth:`_retried`; on a caller's connection, through SQLAlchemy (its transaction).
        """
        with unavailable_as_store_error():
            if self._bound is not None:
                bound = self._bound
                return run(
                    lambda query, params: bound.exec_driver_sql(query, params).first(), False
                )
            for retried in (False, True):
                pooled = self._engine.raw_connection()
                driver = pooled.driver_connection
                assert isinstance(driver, psycopg.Connection)
                try:
                    driver.autocommit = True
                    try:
                        return run(_first_row_on(driver), retried)
                    finally:
                        try:
                            if not driver.broken:
                                driver.autocommit = False  # as the pool lends it to others
                        except psycopg.Error:
                            # (interrupted mid-statement) never pool it in autocommit: a
                            # transaction begun on it later would not be one
                            pooled.invalidate()
                except psycopg.Error:
                    if retried or not driver.broken:
                        raise
                    pooled.invalidate()  # lost: try again once on a fresh connection
                finally:
                    pooled.close()
            raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, statement: TextClause, params: Mapping[str, Any]) -> list[Any]:
        """The rows of a read-only statement (retried once on a lost connection)."""
        return self._retried(lambda conn, _: list(conn.execute(statement, params).all()))

    def _read_rows(self, query: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of a read-only statement in psycopg's syntax (retried once on a lost
        connection): :class:`jobs_postgres.reads.JobReads`' statements, the store's too."""
        return self._retried(lambda conn, _: all_rows(conn.exec_driver_sql(query, dict(params))))

    def _in_transaction(
        self, run: Callable[[Callable[[str, Mapping[str, Any]], list[Any]]], T]
    ) -> T:
        """``run(execute)`` in one transaction, ``execute(query, params)`` giving the rows of a
        statement in psycopg's syntax: on a pooled psycopg connection (committed at the end),
        or in a savepoint of the caller's transaction."""
        with unavailable_as_store_error():
            if self._bound is not None:
                bound = self._bound
                with bound.begin_nested():
                    return run(lambda query, p: all_rows(bound.exec_driver_sql(query, p)))
            with self._driver() as driver, driver.transaction():
                return run(lambda query, p: fetched(driver.execute(query, p or None)))

    def _pipelined(self, run: Callable[[Send], T]) -> T:
        """``run(send)`` in one transaction sent in psycopg's pipeline mode: ``BEGIN`` and the
        statements sent before rows are first asked for go in one round trip, the ``COMMIT`` in
        one more. The worker's claim under limits (with the finish before it) is then two round
        trips, not six. Inside a caller's transaction (no pipeline on its connection): each
        statement at once, in a savepoint."""
        with unavailable_as_store_error():
            if self._bound is not None:
                bound = self._bound

                def send_bound(query: str, params: Mapping[str, Any]) -> Callable[[], list[Any]]:
                    rows = all_rows(bound.exec_driver_sql(query, dict(params)))
                    return lambda: rows

                with bound.begin_nested():
                    return run(send_bound)
            with self._driver() as driver:

                def send(query: str, params: Mapping[str, Any]) -> Callable[[], list[Any]]:
                    return driver.execute(query, params or None).fetchall

                with driver.pipeline(), driver.transaction():
                    return run(send)

    @contextmanager
    def _driver(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection's psycopg connection, back to the pool at the end; a psycopg
        error that left it broken or closed invalidates it (the pool opens a new one)."""
        pooled = self._engine.raw_connection()
        try:
            driver = pooled.driver_connection
            assert isinstance(driver, psycopg.Connection)
            try:
                yield driver
            except psycopg.Error as error:
                if driver.broken or driver.closed:
                    pooled.invalidate(error)
                raise
        finally:
            pooled.close()


def all_rows(result: Any) -> list[Any]:
    """The rows of a SQLAlchemy result; none for a statement that returns none (SET)."""
    return list(result.all()) if result.returns_rows else []


def _first_row_on(driver: psycopg.Connection[Any]) -> Execute:
    """:data:`Execute` on a psycopg connection."""

    def execute(query: str, params: Mapping[str, Any]) -> Any:
        return driver.execute(query, params).fetchone()

    return execute
