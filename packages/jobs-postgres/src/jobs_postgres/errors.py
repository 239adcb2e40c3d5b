"""Driver errors translated at the boundary into the jobs exception tree, by their cause.

- a connection-level failure (the server cannot be used right now) is
  :class:`jobs_core.StoreUnavailable`: callers (the worker, the API) retry later;
- a refusal of the data itself (SQLSTATE class 22 "data exception": a NUL in a text, a value out
  of range, malformed JSON; class 54 "program limit exceeded": a document over PostgreSQL's size
  limits, too many columns) is :class:`jobs_core.StoreRefused`: the same request fails the same
  way on every try, so it is never retried (docs/worker.md, "Errors by cause");
- anything else (a unique violation, a syntax error: a bug) is left as it is.

Callers never import psycopg or SQLAlchemy to tell them apart. This module does not import
SQLAlchemy either (the reads on psycopg alone never load it, decision 0049): SQLAlchemy's classes
are asked only about an error that comes from SQLAlchemy, whose process has imported them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from jobs_core.errors import StoreRefused, StoreUnavailable

REFUSED_SQLSTATE_CLASSES = frozenset({"22", "54"})
"""SQLSTATE classes that refuse the data itself: permanent, never an outage."""

_MESSAGE_MAX_CHARS = 300
"""A server message quotes the refused value (all 256 MB of it): only its start is kept."""


def _of_sqlalchemy(error: BaseException) -> bool:
    """Whether ``error`` comes from SQLAlchemy, told without importing it (for such an error
    it is imported already: ``from sqlalchemy import exc`` below then costs nothing)."""
    return type(error).__module__.startswith("sqlalchemy.")


def _is_driver_error(error: BaseException) -> bool:
    """Whether ``error`` is psycopg's or SQLAlchemy's."""
    if isinstance(error, psycopg.Error):
        return True
    if not _of_sqlalchemy(error):
        return False
    from sqlalchemy import exc

    return isinstance(error, exc.SQLAlchemyError)


def _driver_error(error: BaseException) -> BaseException:
    if not _of_sqlalchemy(error):
        return error
    from sqlalchemy import exc

    if isinstance(error, exc.DBAPIError) and error.orig is not None:
        return error.orig
    return error


def refused_sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of an error that refuses the data itself (class 22 or 54), else None.

    A :class:`psycopg.DataError` raised by psycopg itself, before the server saw the value (a
    NUL byte in a text), has no SQLSTATE and counts as ``"22000"``.
    """
    orig = _driver_error(error)
    if not isinstance(orig, psycopg.Error):
        return None
    sqlstate = orig.sqlstate
    if sqlstate is None:
        return "22000" if isinstance(orig, psycopg.DataError) else None
    return sqlstate if sqlstate[:2] in REFUSED_SQLSTATE_CLASSES else None


def _first_line(error: BaseException) -> str:
    text = str(_driver_error(error)).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    if len(first) > _MESSAGE_MAX_CHARS:
        first = first[:_MESSAGE_MAX_CHARS] + "…"
    return first


def is_unavailable(error: BaseException) -> bool:
    """True for an error that says the server cannot be used right now, not that the request
    was wrong: a lost or refused connection, a server shutting down or restarting, a pool
    with no free connection, a query cancelled by the server (lock or statement timeout).

    A refusal of the data (:func:`refused_sqlstate`) never is, even where psycopg files it
    under ``OperationalError`` (class 54)."""
    if refused_sqlstate(error) is not None:
        return False
    if _of_sqlalchemy(error):
        from sqlalchemy import exc

        if isinstance(error, exc.TimeoutError):  # the pool had no connection to give in time
            return True
        if isinstance(error, exc.DBAPIError):
            if error.connection_invalidated:
                return True
            if error.orig is None:
                return isinstance(error, exc.OperationalError | exc.InterfaceError)
            error = error.orig
    # psycopg maps SQLSTATE classes 08 (connection), 53 (resources), 55 (lock not available),
    # 57 (operator intervention: admin shutdown, query cancelled) and 40 (serialization) to
    # OperationalError; InterfaceError is a connection psycopg itself found closed.
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


def unique_violation(error: BaseException) -> bool:
    """True if ``error`` is a unique violation reported by the server."""
    return isinstance(_driver_error(error), psycopg.errors.UniqueViolation)


@contextmanager
def unavailable_as_store_error() -> Iterator[None]:
    """Re-raise a connection-level failure as :class:`StoreUnavailable` and a refusal of the
    data as :class:`StoreRefused` (see the module's docstring); other errors as they are."""
    try:
        yield
    except Exception as error:
        if not _is_driver_error(error):
            raise
        sqlstate = refused_sqlstate(error)
        if sqlstate is not None:
            raise StoreRefused(
                f"the job store refused the data (SQLSTATE {sqlstate}): {_first_line(error)};"
                " the request will fail the same way if retried: shorten or correct the value",
                sqlstate=sqlstate,
            ) from error
        if is_unavailable(error):
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise StoreUnavailable(f"the job store is unavailable: {first}") from error
        raise
