"""A real HTTP server for the tests: a few pages, broken links, redirects, slow pages.

It runs on a thread of the test process, on 127.0.0.1 and a free port, and counts what it
serves: requests per path (``hits``) and the most requests it ever served at once
(``max_concurrent``), so a test proves what the crawl fetched, how often, and how many at once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Page:
    """One path of the site: an HTML page linking to ``links``, or a redirect, or an error."""

    links: tuple[str, ...] = ()
    status: int = 200
    location: str | None = None
    delay_s: float = 0.0
    content_type: str = "text/html; charset=utf-8"

    def body(self) -> bytes:
        anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in self.links)
        return f"<!doctype html><title>t</title><ul>{anchors}</ul>".encode()


def small_site() -> dict[str, Page]:
    """Eight paths: two broken (404, 500), a redirect, a slow page, a cross-site link, a
    fragment, a ``mailto:`` and a PDF; ``/orphan`` is linked from nowhere."""
    return {
        "/": Page(
            links=(
                "/a",
                "b",
                "/moved",
                "/missing",
                "/slow",
                "http://elsewhere.invalid/x",
                "mailto:someone@example.com",
            )
        ),
        "/a": Page(links=("/", "/b", "/c#section", "/doc.pdf")),
        "/b": Page(links=("/a", "/error")),
        "/c": Page(),
        "/moved": Page(status=301, location="/c"),
        "/error": Page(status=500),
        "/slow": Page(links=("/d",), delay_s=0.3),
        "/d": Page(),
        "/doc.pdf": Page(content_type="application/pdf"),
        "/orphan": Page(),
    }


def chain_site(pages: int, delay_s: float, fan: int = 3) -> dict[str, Page]:
    """``/`` and ``/p/0`` … ``/p/{pages-2}``: each page links to the next ``fan`` pages, each
    answers after ``delay_s`` (a crawl that takes a while, for kill -9 and cancellation)."""
    site: dict[str, Page] = {"/": Page(links=("/p/0",), delay_s=delay_s)}
    for i in range(pages - 1):
        nexts = tuple(f"/p/{j}" for j in range(i + 1, min(i + 1 + fan, pages - 1)))
        site[f"/p/{i}"] = Page(links=nexts, delay_s=delay_s)
    return site


class TestSite:
    """The running server: ``url(path)``, ``hits``, ``max_concurrent``, ``started`` (when each
    request came)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, pages: Mapping[str, Page]) -> None:
        self.pages = dict(pages)
        self.hits: Counter[str] = Counter()
        self.max_concurrent = 0
        self.started: list[float] = []  # time.monotonic() of each request, in order
        self._active = 0
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site._enter(self.path)
                try:
                    page = site.pages.get(self.path.split("?")[0])
                    if page is not None and page.delay_s:
                        time.sleep(page.delay_s)
                    self._answer(page)
                finally:
                    site._leave()

            def _answer(self, page: Page | None) -> None:
                if page is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = page.body() if page.status == 200 else b""
                self.send_response(page.status)
                if page.location is not None:
                    self.send_header("Location", page.location)
                self.send_header("Content-Type", page.content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.site = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"http://{self.site}{path}"

    def _enter(self, path: str) -> None:
        with self._lock:
            self.hits[path] += 1
            self.started.append(time.monotonic())
            self._active += 1
            self.max_concurrent = max(self.max_concurrent, self._active)

    def _leave(self) -> None:
        with self._lock:
            self._active -= 1

    def start(self) -> TestSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serving(pages: Mapping[str, Page]) -> Iterator[TestSite]:
    """Serve ``pages`` for the duration of the block."""
    site = TestSite(pages).start()
    try:
        yield site
    finally:
        site.stop()
