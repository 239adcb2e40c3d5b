"""The fixtures the suite brings itself: ``store`` and ``clock``. Each part imports them, so an
adapter's test module that imports a part gets them with its tests. (Each function has another
name than its fixture, so that the tests' parameters named ``store`` and ``clock`` do not shadow
an import.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from jobs_core import FakeClock, JobStore


@pytest.fixture(name="store")
def store_fixture(jobs_store_factory: Callable[[], JobStore]) -> JobStore:
    """A store with no jobs, of the adapter under test (one call of its ``jobs_store_factory``)."""
    return jobs_store_factory()


@pytest.fixture(name="clock")
def clock_fixture() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()
