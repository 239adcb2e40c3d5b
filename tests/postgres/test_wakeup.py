"""LISTEN/NOTIFY wake-ups, on a real server: an enqueue from another session wakes the waiter."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from jobs_core import FakeClock, NewJob
from jobs_postgres.database import libpq_url
from jobs_postgres.store import PostgresJobStore
from jobs_postgres.wakeup import PostgresWakeup
from sqlalchemy import Engine

pytestmark = pytest.mark.postgres

BOUND_S = 5.0
"""A generous bound for a wake-up that normally takes milliseconds (a loaded CI machine)."""


@pytest.fixture
def wakeup(pg_url: str) -> Iterator[PostgresWakeup]:
    """A listener on the session's database."""
    listening = PostgresWakeup(pg_url)
    assert listening.connected
    yield listening
    listening.close()


def _enqueue_soon(store: PostgresJobStore, clock: FakeClock, delay: float) -> threading.Thread:
    def later() -> None:
        time.sleep(delay)  # a real event in another session, not domain time
        store.insert(NewJob("org-a", "reconcile"), clock.now())

    thread = threading.Thread(target=later)
    thread.start()
    return thread


def test_wait_times_out_without_work(wakeup: PostgresWakeup) -> None:
    started = time.monotonic()
    assert wakeup.wait(0.2) is False
    assert time.monotonic() - started >= 0.19


def test_an_enqueue_in_another_session_wakes_the_waiter(
    wakeup: PostgresWakeup, pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    thread = _enqueue_soon(pg_store, clock, 0.1)
    started = time.monotonic()
    assert wakeup.wait(BOUND_S) is True
    assert time.monotonic() - started < BOUND_S
    thread.join()
    assert wakeup.wait(0.05) is False  # that notification is consumed


def test_work_enqueued_while_the_worker_was_busy_wakes_the_next_wait_at_once(
    wakeup: PostgresWakeup, pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    pg_store.insert(NewJob("org-a", "reconcile"), clock.now())
    deadline = time.monotonic() + BOUND_S
    woken = False
    while not woken and time.monotonic() < deadline:
        woken = wakeup.wait(0.1)
    assert woken


def test_uncommitted_work_does_not_wake_until_the_commit(
    wakeup: PostgresWakeup, pg_store: PostgresJobStore, pg_engine: Engine, clock: FakeClock
) -> None:
    with pg_engine.connect() as conn, conn.begin():
        pg_store.bound_to(conn).insert(NewJob("org-a", "reconcile"), clock.now())
        assert wakeup.wait(0.3) is False
    assert wakeup.wait(BOUND_S) is True


def test_the_listener_reconnects_and_reports_a_wakeup(
    wakeup: PostgresWakeup, pg_url: str, pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        ).fetchone()
        assert killed is not None
        assert killed[0] >= 1
    # a reconnection counts as a wake-up: notifications may have been missed meanwhile
    assert wakeup.wait(BOUND_S) is True
    assert wakeup.connected
    thread = _enqueue_soon(pg_store, clock, 0.1)
    assert wakeup.wait(BOUND_S) is True
    thread.join()


def test_close_wakes_a_waiter_and_later_waits_return_at_once(pg_url: str) -> None:
    listening = PostgresWakeup(pg_url)
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(listening.wait(30)))
    waiter.start()
    time.sleep(0.1)
    listening.close()
    waiter.join(timeout=BOUND_S)
    assert results == [False]
    started = time.monotonic()
    assert listening.wait(10) is False
    assert time.monotonic() - started < 1
    assert not listening.connected


def test_an_unreachable_server_leaves_the_worker_polling() -> None:
    listening = PostgresWakeup("postgresql://nobody@127.0.0.1:1/none")
    try:
        assert not listening.connected
        assert listening.wait(0.1) is False
    finally:
        listening.close()
