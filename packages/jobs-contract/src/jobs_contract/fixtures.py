"""The fixtures the suite brings itself: ``store`` and ``clock``, and for the parts of the store's
roles ``failures`` and ``service``. Each part imports those it uses, so an adapter's test module
that imports a part gets them with its tests. (Each function has another
name than its fixture, so that the tests' parameters named ``store`` and ``clock`` do not shadow
an import.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from jobs_core import FakeClock, Job, JobService, JobStore

from jobs_contract.helpers import service_for


@pytest.fixture(name="store")
def store_fixture(jobs_store_factory: Callable[[], JobStore]) -> JobStore:
    """A store with no jobs, of the adapter under test (one call of its ``jobs_store_factory``)."""
    return jobs_store_factory()


@pytest.fixture(name="clock")
def clock_fixture() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture(name="failures")
def failures_fixture() -> list[Job]:
    """Jobs passed to ``on_fail``, in order."""
    return []


@pytest.fixture(name="service")
def service_fixture(store: JobStore, clock: FakeClock, failures: list[Job]) -> JobService:
    """The use cases over the store under test, the contract's registry (``service_for``)."""
    return service_for(store, clock, failures)
