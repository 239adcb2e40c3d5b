"""Helpers of the browser tests: the system under test as child processes, the browser's
launch options, signing in."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.cli.helpers import JOBS, Output, start
from tests.cli.helpers import wait_until as wait_for

if TYPE_CHECKING:
    from jobs_core import Job, NewJob
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

TIMEOUT_MS = 30_000
"""How long a step of a page (an action, a wait, an ``expect``) may take by default."""

WORKER_CONCURRENCY = 2
"""Slots of the test worker: two long sleeps fill it, so a third job stays queued."""


def chromium_path() -> str | None:
    """The Chromium executable the tests drive, or None."""
    explicit = os.environ.get("JOBS_TEST_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(name).is_file():
            return name
    return shutil.which("chromium")


def skip_reason() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (uv sync installs the dev group)"
    if chromium_path() is None:
        return (
            "no Chromium found (/usr/bin/chromium or JOBS_TEST_CHROMIUM); "
            "install it with `apt-get install chromium` (.ci/run does)"
        )
    return None


@dataclass
class System:
    """The API and the worker as child processes on one database."""

    url: str
    base: str
    port: int
    env: dict[str, str]
    api: subprocess.Popen[str] | None = None
    api_output: Output | None = None
    worker: subprocess.Popen[str] | None = None
    worker_output: Output | None = None
    tokens: dict[str, str] = field(default_factory=dict)

    def start_api(self) -> None:
        """Start ``jobs api`` and wait until it answers."""
        self.api, self.api_output = start(
            [str(JOBS), "api", "--port", str(self.port)], self.env, new_group=True
        )
        wait_for("the API to answer /healthz", self._healthy, timeout=60, every=0.2)

    def _healthy(self) -> bool:
        assert self.api is not None
        if self.api.poll() is not None:
            raise AssertionError(f"the API exited:\n{self.api_output and self.api_output.text()}")
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop_api(self) -> None:
        """SIGTERM the API and wait for it."""
        stop(self.api)
        self.api = None

    def start_worker(self) -> None:
        """Start ``jobs worker``, without prefetch: the panel's pictures and counts show exactly
        as many running jobs as the worker has slots (a prefetched job is running in the table
        until a slot takes it; docs/worker.md, "Prefetch")."""
        argv = [str(JOBS), "worker", "--concurrency", str(WORKER_CONCURRENCY), "--prefetch", "0"]
        self.worker, self.worker_output = start(argv, self.env, new_group=True)

    def token(self, org: str) -> str:
        """A token of ``org`` (created once), issued as ``jobs token create`` issues one but in
        this process: a CLI process per test's org cost about a second of start-up each."""
        if org not in self.tokens:
            from jobs_core import SystemClock
            from jobs_postgres.database import create_engine
            from jobs_postgres.tokens import PostgresTokenStore
            from jobs_tokens import issue_token

            engine = create_engine(self.url)
            try:
                store = PostgresTokenStore(engine)
                self.tokens[org], _ = issue_token(store, org, "browser", SystemClock().now())
            finally:
                engine.dispose()
        return self.tokens[org]

    def insert(self, jobs: list[NewJob]) -> list[Job]:
        """Insert ``jobs`` in one transaction by the store, in this process, as another writer
        would (the panel learns of them by their events): no ``jobs enqueue`` process to start,
        and no API needed (one test inserts while it is down)."""
        from datetime import UTC, datetime

        from jobs_postgres.database import create_engine
        from jobs_postgres.store import PostgresJobStore

        engine = create_engine(self.url)
        try:
            return PostgresJobStore(engine).insert_many(jobs, datetime.now(UTC))
        finally:
            engine.dispose()

    def call(self, method: str, path: str, org: str, body: dict[str, Any] | None = None) -> Any:
        """The API over HTTP with ``org``'s bearer token; the decoded body (None for 204)."""
        request = urllib.request.Request(
            f"{self.base}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.token(org)}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def enqueue(self, org: str, type_: str, payload: dict[str, Any] | None = None) -> str:
        """Enqueue over HTTP; the job's id."""
        job = self.call("POST", "/jobs", org, {"type": type_, "payload": payload or {}})
        return str(job["id"])

    def job(self, org: str, job_id: str) -> dict[str, Any]:
        """``GET /jobs/{id}``."""
        found: dict[str, Any] = self.call("GET", f"/jobs/{job_id}", org)
        return found

    def cancel_active(self, org: str) -> None:
        """Cancel every queued or running job of ``org`` (a job that ends meanwhile is left)."""
        page = self.call("GET", "/jobs?status=active&limit=200", org)
        for job in page["items"]:
            try:
                self.call("POST", f"/jobs/{job['id']}/cancel", org)
            except urllib.error.HTTPError as error:
                if error.code != 409:  # 409: it finished meanwhile
                    raise

    def wait_status(self, org: str, job_id: str, *statuses: str, timeout: float = 60) -> None:
        """Wait until the job is in one of ``statuses`` (as the API says)."""
        wait_for(
            f"job {job_id} to be {'/'.join(statuses)}",
            lambda: self.job(org, job_id)["status"] in statuses,
            timeout=timeout,
            every=0.2,
        )


def stop(process: subprocess.Popen[str] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def sign_in(page: Page, system: System, org: str) -> None:
    """Type ``org``'s token on the sign-in page and wait for the panel to be live."""
    page.goto(f"{system.base}/signin")
    page.get_by_label("API token").fill(system.token(org))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{system.base}/")
    page.wait_for_selector("body[data-ready='true']")
    page.wait_for_selector("#live[data-state='live']")


def screenshot_dir() -> Path:
    """Where the run saves its screenshots: ``JOBS_SCREENSHOT_DIR``, else ``.data/screenshots``
    (git-ignored). ``JOBS_SCREENSHOT_DIR=docs/img`` refreshes the README's picture."""
    root = Path(__file__).resolve().parents[2]
    chosen = Path(os.environ.get("JOBS_SCREENSHOT_DIR") or root / ".data" / "screenshots")
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


def new_context(browser: Browser, scheme: str = "light") -> BrowserContext:
    """A fresh profile (no cookie) in ``scheme``, with reduced motion for steady pictures."""
    context = browser.new_context(
        viewport={"width": 1400, "height": 860},
        color_scheme=scheme,  # type: ignore[arg-type]
        reduced_motion="reduce",
    )
    context.set_default_timeout(TIMEOUT_MS)
    return context


def inside(page: Page, locator: Locator) -> None:
    """``locator`` scrolled into view lies wholly inside the viewport, not covered (its centre
    hits it), scrolled and measured in one step in the page: a row redrawn meanwhile is measured
    as it is now."""
    box = locator.evaluate(
        """(el) => { el.scrollIntoView({ block: "nearest", inline: "nearest" });
                     const r = el.getBoundingClientRect();
                     const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
                     return { x: r.x, y: r.y, width: r.width, height: r.height,
                              reachable: hit !== null && el.contains(hit),
                              hit: hit && hit.outerHTML.slice(0, 120) }; }"""
    )
    assert box["reachable"], (locator, "covered by", box["hit"])
    viewport = page.viewport_size
    assert viewport is not None
    assert box["x"] >= 0, (locator, box)
    assert box["x"] + box["width"] <= viewport["width"] + 0.5, (locator, box, viewport)
    assert box["y"] >= 0, (locator, box)
    assert box["y"] + box["height"] <= viewport["height"] + 0.5, (locator, box, viewport)


def no_horizontal_overflow(page: Page) -> None:
    """The document is no wider than the viewport, and the jobs table no wider than its frame
    (which would scroll, hiding the actions at its end: clipped)."""
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.body.scrollWidth, innerWidth]"
    )
    assert max(widths[:2]) <= widths[2], widths
    frame = page.evaluate(
        """() => { const wrap = document.querySelector('#jobs-view .table-wrap');
                   return [wrap.scrollWidth, wrap.clientWidth]; }"""
    )
    assert frame[0] <= frame[1], frame
