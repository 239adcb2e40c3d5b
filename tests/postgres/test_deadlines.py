"""Bounded waits of the worker's connections (jobs_postgres.deadlines; issue 11, finding 1):
the server-side timeouts and TCP settings are applied, and a call on a link that went silent
(nothing forwarded, nothing closed) is aborted at its deadline instead of waiting forever."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from jobs_core import FakeClock, NewJob, StoreUnavailable
from jobs_postgres.database import create_engine
from jobs_postgres.deadlines import abort_stuck_calls, aborted_calls
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

from tests.postgres.proxy import LinkProxy

pytestmark = pytest.mark.postgres


@pytest.fixture
def proxy(pg_url: str) -> Iterator[LinkProxy]:
    link = LinkProxy(pg_url)
    yield link
    link.close()


def test_the_workers_engine_bounds_every_wait(pg_url: str) -> None:
    from jobs_worker.composition import _engine

    engine = _engine(pg_url, True, 4.0)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "3200ms"
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "1600ms"
            assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "off"
            assert conn.execute(text("SHOW TimeZone")).scalar_one() == "UTC"
            driver = conn.connection.driver_connection
            assert driver is not None
            params = driver.info.get_parameters()
        if "host" in params and not params["host"].startswith("/"):
            assert params["keepalives"] == "1"
            assert params["keepalives_idle"] == "4"
            assert params["tcp_user_timeout"] == "4000"
            assert params["connect_timeout"] == "4"
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_call_on_a_frozen_link_is_aborted_at_its_deadline_and_the_next_one_works(
    proxy: LinkProxy, pg_engine: Engine, clock: FakeClock
) -> None:
    # One pooled connection: the frozen call is on it (not on a new connection, whose
    # connect_timeout would answer first).
    engine = create_engine(
        proxy.url, pool_size=1, max_overflow=0, connect_args={"connect_timeout": 2}
    )
    abort_stuck_calls(engine, 1.0)
    store = PostgresJobStore(engine)
    try:
        store.insert(NewJob("org-a", "reconcile"), clock.now())
        proxy.freeze()
        began = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.claim(1, clock.now())
        assert time.monotonic() - began < 10  # before: blocked until the sockets were reset
        # (counted by the watchdog's thread just after the socket is shut: it may lag the error)
        counted = time.monotonic() + 5
        while aborted_calls(engine) < 1:
            assert time.monotonic() < counted, "the watchdog did not abort the call"
            time.sleep(0.01)
        proxy.restore()
        deadline = time.monotonic() + 20
        while True:  # the pool may hand out a connection opened while frozen: retry a little
            try:
                claimed = store.claim(1, clock.now())
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store did not come back"
                time.sleep(0.1)
        assert len(claimed) <= 1
    finally:
        proxy.restore()
        engine.dispose()
