"""This repository's two adapters under the contract suite (the ``jobs-contract`` package,
docs/adapters.md): the fixtures the suite asks an adapter for, for each adapter in turn.

``memory`` builds an ``InMemoryJobStore``; ``postgres`` uses the ``pg_store`` of the root
conftest (a ``PostgresJobStore`` on a real server, its tables emptied for the test); ``pooled``
the same store through PgBouncer in transaction mode (``pooled_store``, tests/pooling.py:
skipped with the reason where pgbouncer is not installed). The test
modules of this folder import the suite's parts, one part each (``test_suite_*.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from jobs_core import InMemoryJobStore, JobStore
from jobs_core.events import EventFeed
from jobs_core.quotas import InMemoryQuotaStore, QuotaStore
from sqlalchemy import Engine

from tests.pooling import empty_tables
from tests.profiles import scaled

ADAPTERS = [
    "memory",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("pooled", marks=[pytest.mark.postgres, pytest.mark.pooler]),
]


@pytest.fixture(params=ADAPTERS)
def jobs_store_factory(request: pytest.FixtureRequest) -> Callable[[], JobStore]:
    """A store with no jobs per call, of each adapter: a new ``InMemoryJobStore``, or the
    test's ``PostgresJobStore`` with its ``jobs`` emptied again (the root conftest empties the
    tables before the test, so the first call has nothing to do)."""
    if request.param == "memory":
        return InMemoryJobStore

    pooled = request.param == "pooled"
    store: JobStore = request.getfixturevalue("pooled_store" if pooled else "pg_store")
    engine: Engine = request.getfixturevalue("pooled_engine" if pooled else "pg_engine")
    calls = 0

    def empty() -> JobStore:
        nonlocal calls
        calls += 1
        if calls > 1:
            with engine.begin() as connection:
                empty_tables(
                    connection,
                    "jobs, job_attempts, job_type_pauses, job_waits, job_wait_ends, job_rate_keys",
                )
        return store

    return empty


@pytest.fixture
def jobs_event_feed(store: JobStore, request: pytest.FixtureRequest) -> Iterator[EventFeed]:
    """The event feed of the store under test."""
    if isinstance(store, InMemoryJobStore):
        yield store.events
        return
    from jobs_postgres.events import PostgresEventFeed

    built = PostgresEventFeed(_engine_of(store))
    yield built
    built.close()


@pytest.fixture
def jobs_state_machine_examples(jobs_store_factory: Callable[[], JobStore]) -> int:
    """More random programs in memory, where one costs little."""
    return scaled(60 if jobs_store_factory is InMemoryJobStore else 25)


@pytest.fixture
def jobs_quota_store(store: JobStore, request: pytest.FixtureRequest) -> QuotaStore:
    """The quota store that counts the jobs of the store under test."""
    if isinstance(store, InMemoryJobStore):
        return InMemoryQuotaStore(store)
    from jobs_postgres.quotas import PostgresQuotaStore

    engine = _engine_of(store)
    with engine.begin() as connection:  # other tests of the session leave schedules behind
        empty_tables(connection, "schedules, schedule_runs, job_org_quotas")
    return PostgresQuotaStore(engine)


def _engine_of(store: JobStore) -> Engine:
    """The engine of a PostgreSQL store under test (direct or through the pooler)."""
    from jobs_postgres.store import PostgresJobStore

    assert isinstance(store, PostgresJobStore)
    return store.engine
