"""The contract suite runs every test of this folder against every store adapter.

The ``store`` fixture is the only thing an adapter provides: ``memory`` builds an
``InMemoryJobStore``; ``postgres`` asks for the ``pg_store`` fixture of the root conftest (a fresh,
empty ``PostgresJobStore`` on a real server).
"""

from __future__ import annotations

import pytest
from jobs_core import FakeClock, InMemoryJobStore, JobStore

ADAPTERS = ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest) -> JobStore:
    """A fresh, empty store of each adapter."""
    if request.param == "memory":
        return InMemoryJobStore()
    pg_store: JobStore = request.getfixturevalue("pg_store")
    return pg_store


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()
