"""Driver errors translated at the boundary into the jobs exception tree.

Callers (the worker, the API) catch :class:`jobs_core.StoreUnavailable` and retry later; they
never import psycopg or SQLAlchemy to do so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from jobs_core import StoreUnavailable
from sqlalchemy import exc


def is_unavailable(error: BaseException) -> bool:
    """True for an error that says the server cannot be used right now, not that the request
    was wrong: a lost or refused connection, a server shutting down or restarting, a pool
    with no free connection, a query cancelled by the server (lock or statement timeout)."""
    if isinstance(error, exc.DBAPIError):
        if error.connection_invalidated:
            return True
        error = error.orig if error.orig is not None else error
    if isinstance(error, exc.TimeoutError):  # the pool had no connection to give in time
        return True
    # psycopg maps SQLSTATE classes 08 (connection), 53 (resources), 55 (lock not available),
    # 57 (operator intervention: admin shutdown, query cancelled) and 40 (serialization) to
    # OperationalError; InterfaceError is a connection psycopg itself found closed.
    return isinstance(
        error,
        psycopg.OperationalError
        | psycopg.InterfaceError
        | exc.OperationalError
        | exc.InterfaceError,
    )


def unique_violation(error: BaseException) -> bool:
    """True if ``error`` is a unique violation reported by the server."""
    orig = error.orig if isinstance(error, exc.DBAPIError) else error
    return isinstance(orig, psycopg.errors.UniqueViolation)


@contextmanager
def unavailable_as_store_error() -> Iterator[None]:
    """Re-raise a connection-level failure as :class:`StoreUnavailable`."""
    try:
        yield
    except (exc.SQLAlchemyError, psycopg.Error) as error:
        if is_unavailable(error):
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise StoreUnavailable(f"the job store is unavailable: {first}") from error
        raise
