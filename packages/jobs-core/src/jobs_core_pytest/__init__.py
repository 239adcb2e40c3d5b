"""The pytest plugin of jobs-core's testing kit (:mod:`jobs_core.testing`), registered through
the ``pytest11`` entry point of the jobs-core distribution, so installing jobs-core is enough.

A package of its own, beside ``jobs_core``: it imports pytest, which ``jobs_core`` never does
(it depends on the standard library only); pytest loads this module, nothing else does.

Fixtures:

- ``jobs_registry``: an empty :class:`~jobs_core.Registry`; override it in your ``conftest.py``
  to return your module's registry.
- ``jobs_clock``: a :class:`~jobs_core.FakeClock`.
- ``jobs_harness``: a :class:`~jobs_core.testing.JobsHarness` on an in-memory store, over
  ``jobs_registry`` and ``jobs_clock``.
"""

from __future__ import annotations

import pytest
from jobs_core.clock import FakeClock
from jobs_core.registry import Registry
from jobs_core.testing import JobsHarness


@pytest.fixture
def jobs_registry() -> Registry:
    """The job types the harness runs (override it to return your module's registry)."""
    return Registry("test")


@pytest.fixture
def jobs_clock() -> FakeClock:
    """The harness's clock: time moves only when the test says so."""
    return FakeClock()


@pytest.fixture
def jobs_harness(jobs_registry: Registry, jobs_clock: FakeClock) -> JobsHarness:
    """A worker in the test's thread over an in-memory store (docs/testing.md)."""
    return JobsHarness(jobs_registry, clock=jobs_clock)
