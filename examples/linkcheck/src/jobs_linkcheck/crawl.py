"""The crawl's pure logic: URLs, links in a page, and the frontier a crawl resumes from.

Nothing here does I/O, so all of it is tested without a network or a database. The frontier is
what the ``linkcheck_crawl`` handler saves as its checkpoint: URLs found but not yet handed to a
fetch job (``frontier``), URLs handed out whose result is not read back yet (``pending``), and
URLs whose result was read back (``done``); never more than ``max_pages`` URLs in all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

__all__ = ["Frontier", "extract_links", "normalize", "same_site", "site_of"]


def normalize(url: str) -> str | None:
    """``url`` as the crawl keys it: scheme and host lowercased, default port and fragment
    dropped, an empty path as ``/``. None for anything but an absolute http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port that is not a number, an unbalanced IPv6 bracket
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        return None
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    default = 80 if scheme == "http" else 443
    netloc = host if port in (None, default) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def site_of(url: str) -> str:
    """The site a URL belongs to: its host, with the port when it is not the default
    (``example.com``, ``127.0.0.1:8123``). A crawl follows only links of its own site."""
    normalized = normalize(url)
    if normalized is None:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    return urlsplit(normalized).netloc


def same_site(url: str, site: str) -> bool:
    """True when ``url`` is an http(s) URL of ``site``."""
    normalized = normalize(url)
    return normalized is not None and urlsplit(normalized).netloc == site


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        href = values.get("href")
        if href is None:
            return
        if tag == "a":
            self.hrefs.append(href)
        elif tag == "base" and self.base is None:
            self.base = href


def extract_links(html: str, page_url: str) -> list[str]:
    """The absolute, normalized http(s) targets of the page's ``<a href>``, in page order and
    without repeats (a ``<base href>`` applies; ``mailto:``, ``javascript:`` and the like are
    dropped)."""
    parser = _Anchors()
    parser.feed(html)
    parser.close()
    base = urljoin(page_url, parser.base) if parser.base else page_url
    links: dict[str, None] = {}
    for href in parser.hrefs:
        target = normalize(urljoin(base, href.strip()))
        if target is not None:
            links.setdefault(target, None)
    return list(links)


MAX_URL_CHARS = 1024
"""Longer links are not crawled (counted as dropped): a checkpoint of ``max_pages`` URLs then
stays well under the 8 MiB a job's checkpoint may hold."""


@dataclass(slots=True)
class Frontier:
    """Where a crawl stands. Every URL the crawl has taken on is in exactly one list:
    ``frontier`` (found, not handed to a fetch job yet), ``pending`` (handed out, result not read
    back yet) or ``done``; never more than ``max_pages`` in all."""

    site: str
    max_pages: int
    frontier: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    dropped: int = 0
    """Same-site links not taken on: ``max_pages`` was reached, or longer than
    :data:`MAX_URL_CHARS`."""

    @classmethod
    def start(cls, start_url: str, max_pages: int) -> Frontier:
        """A new crawl from ``start_url`` (its site is the start URL's)."""
        if max_pages < 1:
            raise ValueError("max_pages must be >= 1")
        frontier = cls(site=site_of(start_url), max_pages=max_pages)
        frontier.discover([start_url])
        return frontier

    @property
    def seen(self) -> int:
        """How many URLs the crawl has taken on."""
        return len(self.frontier) + len(self.pending) + len(self.done)

    def discover(self, links: Iterable[str]) -> int:
        """Take on the same-site links not seen yet, up to ``max_pages`` in all; how many."""
        known = {*self.frontier, *self.pending, *self.done}
        added = 0
        for link in links:
            url = normalize(link)
            if url is None or url in known or urlsplit(url).netloc != self.site:
                continue
            if len(known) >= self.max_pages or len(url) > MAX_URL_CHARS:
                self.dropped += 1
                continue
            known.add(url)
            self.frontier.append(url)
            added += 1
        return added

    def hand_out(self, room: int) -> list[str]:
        """Move up to ``room`` URLs from the frontier to ``pending`` and return them."""
        batch = self.frontier[: max(room, 0)]
        del self.frontier[: len(batch)]
        self.pending.extend(batch)
        return batch

    def settle(self, url: str, links: Iterable[str]) -> None:
        """The result of a pending URL came back: it is done; its links are taken on. Settling
        a URL that is not pending does nothing (a replay after a crash)."""
        if url not in self.pending:
            return
        self.pending.remove(url)
        self.done.append(url)
        self.discover(links)

    @property
    def finished(self) -> bool:
        """Nothing left to hand out and nothing out."""
        return not self.frontier and not self.pending

    def to_checkpoint(self) -> dict[str, Any]:
        """The JSON document the handler saves (and :meth:`from_checkpoint` reads back)."""
        return {
            "site": self.site,
            "max_pages": self.max_pages,
            "frontier": list(self.frontier),
            "pending": list(self.pending),
            "done": list(self.done),
            "dropped": self.dropped,
        }

    @classmethod
    def from_checkpoint(cls, document: Mapping[str, Any]) -> Frontier:
        """The frontier a checkpoint holds."""
        return cls(
            site=str(document["site"]),
            max_pages=int(document["max_pages"]),
            frontier=[str(url) for url in document["frontier"]],
            pending=[str(url) for url in document["pending"]],
            done=[str(url) for url in document["done"]],
            dropped=int(document.get("dropped", 0)),
        )
