"""The panel in a real headless Chromium, against a real API process and a real worker process.

Chromium is Debian's (``/usr/bin/chromium``, or ``JOBS_TEST_CHROMIUM``), driven by Playwright
for Python over its own protocol; Playwright's downloaded browsers are never used. Without a
Chromium (or without Playwright) every test here is skipped and the reason printed; ``.ci/run``
installs Chromium so that CI always runs them.

A system is a fresh database migrated by ``jobs migrate``, with ``jobs api`` and ``jobs worker``
as child processes with the demo types; each test works in an org of its own (its own token), so
the tests never see each other's jobs. The modules of one ``xdist_group`` share one system (they
run on one xdist worker, one after the other): it is built for the first test of the group and
stopped after its last (``pytest_runtest_teardown`` below), a few seconds of process starts, a
migration and a shutdown per module saved. A module without a group, or with a ``system`` of its
own (another setting), has its own. Two modules that name the same org (``acme``, for the
pictures) are in different groups. Chromium and Playwright's driver are started for the first
browser test of a stretch of them and stopped after its last (each test gets a fresh browser
context: no cookie, no storage).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.browser.helpers import (
    CHROMIUM_ARGS,
    TIMEOUT_MS,
    System,
    chromium_path,
    new_context,
    sign_in,
    skip_reason,
    stop,
)
from tests.cli.helpers import clean_env, free_port, ok, run_jobs
from tests.dropping import drop_later

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the browser tests, saying why, where no Chromium can run them."""
    reason = skip_reason()
    if reason is None:
        return
    marker = pytest.mark.skip(reason=reason)
    for item in items:
        if "tests/browser/" in str(item.path):
            item.add_marker(marker)


def pytest_report_header(config: pytest.Config) -> str:
    """Say which browser the panel tests use, or why they are skipped."""
    reason = skip_reason()
    return f"browser: {chromium_path()}" if reason is None else f"browser tests skipped: {reason}"


@contextlib.contextmanager
def running_system(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory, **extra_env: str
) -> Iterator[System]:
    """A migrated database of its own, with the API and a worker running on it (``extra_env``
    tunes them: a test module that needs another setting builds its own system)."""
    from jobs_postgres.database import ensure_database, with_database

    admin = with_database(pg_url, "postgres")
    name = f"jobs_browser_{secrets.token_hex(4)}"
    ensure_database(admin, name)
    port = free_port()
    env = clean_env(
        JOBS_DATABASE_URL=with_database(pg_url, name),
        JOBS_DATA_DIR=str(tmp_path_factory.mktemp("browser-data")),
        JOBS_DEMO_TYPES="1",
        JOBS_DEMO_OVER_HTTP="1",  # the panel enqueues the demo types, as under jobs dev
        JOBS_CANCEL_CHECK_S="0.2",
        JOBS_POLL_INTERVAL_S="0.2",
        JOBS_SHUTDOWN_GRACE_S="2",
        JOBS_API_TOKEN_CACHE_S="0",
        **extra_env,
    )
    built = System(
        url=env["JOBS_DATABASE_URL"], base=f"http://127.0.0.1:{port}", port=port, env=env
    )
    try:
        ok(run_jobs(env, "migrate"))
        built.start_api()
        built.start_worker()
        yield built
    finally:
        stop(built.worker)
        stop(built.api)
        drop_later(admin, name)  # off the test's clock (tests/dropping.py)


class SharedSystems:
    """The systems of this test session, one per sharing key (:func:`sharing_key`), each kept
    until a test of another key runs."""

    def __init__(self, pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._pg_url = pg_url
        self._tmp_path_factory = tmp_path_factory
        self._built: dict[str, tuple[System, contextlib.ExitStack]] = {}

    def get(self, key: str) -> System:
        """The system of ``key``, built on first use."""
        if key not in self._built:
            stack = contextlib.ExitStack()
            built = stack.enter_context(running_system(self._pg_url, self._tmp_path_factory))
            self._built[key] = (built, stack)
        return self._built[key][0]

    def keep_only(self, key: str | None) -> None:
        """Stop every system but that of ``key``."""
        for other in [k for k in self._built if k != key]:
            _, stack = self._built.pop(other)
            stack.close()


_SHARED = pytest.StashKey[SharedSystems]()


def sharing_key(node: pytest.Item | pytest.Module) -> str:
    """The name of the node's ``xdist_group`` (its module's), else its module's node id."""
    group = node.get_closest_marker("xdist_group")
    if group is not None:
        return str(group.args[0] if group.args else group.kwargs["name"])
    module = node if isinstance(node, pytest.Module) else node.getparent(pytest.Module)
    assert module is not None
    return module.nodeid


@pytest.fixture(scope="session")
def _systems(
    request: pytest.FixtureRequest, pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedSystems]:
    shared = SharedSystems(pg_url, tmp_path_factory)
    request.config.stash[_SHARED] = shared
    try:
        yield shared
    finally:
        shared.keep_only(None)
        del request.config.stash[_SHARED]


class Chromium:
    """Playwright's driver and Debian's headless Chromium, started for a browser test and kept
    while the next test is one too.

    Not for the whole session: the sync API keeps an asyncio loop running in the thread
    between its calls, and the next asyncio test of the process then fails ("Cannot run the
    event loop while another loop is running").

    An ``expect`` waits as long as any other step of a page (the contexts' default timeout), not
    Playwright's 5 s: on the shared 2-core machine a request the page makes before it shows
    what a test waits for (the bulk confirmation's dry run) once took longer, and the test
    failed with the right text on its way."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self._browser: Browser | None = None

    def get(self) -> Browser:
        if self._browser is None:
            from playwright.sync_api import expect, sync_playwright

            expect.set_options(timeout=TIMEOUT_MS)
            executable = chromium_path()
            assert executable is not None
            with contextlib.ExitStack() as stack:
                driver = stack.enter_context(sync_playwright())
                launched = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
                stack.callback(launched.close)
                self._stack, self._browser = stack.pop_all(), launched
        return self._browser

    def close(self) -> None:
        stack, self._stack, self._browser = self._stack, None, None
        if stack is not None:
            stack.close()


_CHROMIUM = pytest.StashKey[Chromium]()


@pytest.fixture(scope="session")
def _chromium(request: pytest.FixtureRequest) -> Iterator[Chromium]:
    chromium = Chromium()
    request.config.stash[_CHROMIUM] = chromium
    try:
        yield chromium
    finally:
        chromium.close()
        del request.config.stash[_CHROMIUM]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a browser test (and its fixtures' teardown), stop what the next test does not use:
    a group's system lives from its first test to its last, not to the end of the session (the
    ``alone`` tests need the server's connections), and Chromium from the first browser test
    of a stretch to its last."""
    try:
        yield
    finally:
        uses = set(getattr(nextitem, "fixturenames", ())) if nextitem is not None else set()
        shared = item.config.stash.get(_SHARED, None)
        if shared is not None:
            keep = "system" in uses and nextitem is not None
            shared.keep_only(sharing_key(nextitem) if keep and nextitem is not None else None)
        chromium = item.config.stash.get(_CHROMIUM, None)
        if chromium is not None and "browser" not in uses:
            chromium.close()


@pytest.fixture(scope="module")
def system(request: pytest.FixtureRequest, _systems: SharedSystems) -> System:
    """A migrated database with the API and a worker running on it: the module's group's (see
    the module's docstring), else the module's own."""
    assert isinstance(request.node, pytest.Module)
    return _systems.get(sharing_key(request.node))


@pytest.fixture
def browser(_chromium: Chromium) -> Browser:
    """Debian's headless Chromium (see :class:`Chromium`)."""
    return _chromium.get()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile (no cookie) per test."""
    made = new_context(browser)
    yield made
    made.close()


@pytest.fixture
def org(system: System) -> Iterator[str]:
    """An org no other test uses; its jobs still active afterwards are cancelled, so the next
    test finds the worker's slots free."""
    name = f"web-{secrets.token_hex(4)}"
    yield name
    system.cancel_active(name)


@pytest.fixture
def panel(context: BrowserContext, system: System, org: str) -> Page:
    """A signed-in panel of ``org``, live."""
    page = context.new_page()
    sign_in(page, system, org)
    return page
