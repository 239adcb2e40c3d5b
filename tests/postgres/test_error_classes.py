"""Driver errors are classified by their cause: only a connection-level failure is an outage
(``StoreUnavailable``); a refusal of the data itself (SQLSTATE class 22 or 54) is
``StoreRefused``, never retried (docs/worker.md, "Errors by cause")."""

from __future__ import annotations

import psycopg
import pytest
from jobs_core import FakeClock, NewJob, StoreRefused, StoreUnavailable
from jobs_postgres.errors import is_unavailable, refused_sqlstate, unavailable_as_store_error
from jobs_postgres.store import PostgresJobStore
from jobs_worker.worker import is_outage
from sqlalchemy import Engine, text

pytestmark = pytest.mark.postgres


def _raised(engine: Engine, statement: str) -> BaseException:
    try:
        with unavailable_as_store_error(), engine.connect() as conn:
            conn.execute(text(statement))
    except Exception as error:
        return error
    raise AssertionError(f"{statement[:60]!r} did not fail")


def _timed_out(engine: Engine) -> None:
    with unavailable_as_store_error(), engine.connect() as conn:
        conn.execute(text("SET statement_timeout = '50ms'"))
        try:
            conn.execute(text("SELECT pg_sleep(5)"))
        finally:
            conn.invalidate()


def test_a_program_limit_is_refused_not_an_outage(pg_engine: Engine) -> None:
    """Class 54 (here 54011, too many columns) arrives as psycopg's OperationalError: it used
    to be taken for an outage and retried forever."""
    columns = ", ".join(f"{i} AS c{i}" for i in range(1700))
    error = _raised(pg_engine, f"SELECT {columns}")
    assert isinstance(error, StoreRefused)
    assert error.sqlstate == "54011"
    assert isinstance(error.__cause__, Exception)
    assert isinstance(getattr(error.__cause__, "orig", None), psycopg.OperationalError)
    assert not is_unavailable(error.__cause__)
    assert not is_outage(error)
    assert "refused" in str(error)
    assert "retried" in str(error)


def test_a_data_exception_is_refused_with_a_short_message(pg_engine: Engine) -> None:
    error = _raised(pg_engine, "SELECT ('\"' || repeat('x', 100000) || '\"\\u0000')::jsonb")
    assert isinstance(error, StoreRefused)
    assert str(error.sqlstate).startswith("22")
    assert len(str(error)) < 600  # the server quotes the whole value: only its start is kept
    assert not is_outage(error)


def test_a_nul_refused_by_the_driver_itself_is_refused(
    pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    """psycopg refuses a NUL in a text before the server sees it (no SQLSTATE)."""
    with pytest.raises(StoreRefused) as caught:
        pg_store.insert(NewJob("org-a", "reconcile", dedup_key="a\x00b"), clock.now())
    assert caught.value.sqlstate == "22000"
    assert refused_sqlstate(psycopg.DataError("x")) == "22000"
    assert refused_sqlstate(psycopg.OperationalError("connection lost")) is None


def test_a_statement_timeout_and_a_lost_connection_stay_outages(pg_engine: Engine) -> None:
    """SQLSTATE 57014 (query cancelled by the statement timeout) is an outage: retry later."""
    with pytest.raises(StoreUnavailable):
        _timed_out(pg_engine)
    assert is_outage(StoreUnavailable("x"))
