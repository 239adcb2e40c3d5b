"""The panel in a real headless Chromium, against a real API process and a real worker process.

Chromium is Debian's (``/usr/bin/chromium``, or ``JOBS_TEST_CHROMIUM``), driven by Playwright
for Python over its own protocol; Playwright's downloaded browsers are never used. Without a
Chromium (or without Playwright) every test here is skipped and the reason printed; ``.ci/run``
installs Chromium so that CI always runs them.

One system per module: a fresh database migrated by ``jobs migrate``, ``jobs api`` and
``jobs worker`` as child processes with the demo types. Each test works in an org of its own
(its own token), so the tests never see each other's jobs.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.browser.helpers import (
    CHROMIUM_ARGS,
    System,
    chromium_path,
    new_context,
    sign_in,
    skip_reason,
    stop,
)
from tests.cli.helpers import clean_env, free_port, ok, run_jobs

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright


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
    from jobs_postgres.database import drop_database, ensure_database, with_database

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
        drop_database(admin, name)


@pytest.fixture(scope="module")
def system(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """A migrated database of its own, with the API and a worker running on it."""
    with running_system(pg_url, tmp_path_factory) as built:
        yield built


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    """Playwright's driver (it talks to the browser; it downloads nothing here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """Debian's headless Chromium."""
    executable = chromium_path()
    assert executable is not None
    launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    yield launched
    launched.close()


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
