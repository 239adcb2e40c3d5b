"""How the tests are spread over the xdist workers (``-n`` and ``--dist loadgroup`` in the pytest
config), loaded by the root conftest.

``loadgroup`` hands the workers one test at a time, in collection order, except the tests of one
``xdist_group``, which go to one worker together (the largest groups first). Two things follow:

- A module-scoped fixture is built once per worker that runs one of the module's tests: the
  panel's modules (an API, a worker and a Chromium each) were built by all three workers, each
  time at a cost of seconds. The tests that use a module-scoped fixture of this repository are
  put in an ``xdist_group`` of their module, so one worker builds the fixture once.
- The last test to start sets the end of the run: a 60-second test handed out last ran alone at
  the end. The modules that hold ``slow`` tests are collected first (their order kept, and the
  order of the tests in each module), so the long tests start first and the short ones fill the
  workers up at the end.
"""

from __future__ import annotations

import pytest


def _module_fixture(item: pytest.Item) -> bool:
    """True when the test uses a module-scoped fixture defined in this repository (a fixture of
    a plugin has an empty ``baseid``)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definition.scope == "module" and definition.baseid
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow modules first; the tests sharing a module-scoped fixture in one group."""
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)  # stable
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
