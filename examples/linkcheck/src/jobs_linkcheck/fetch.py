"""Fetching one page with httpx: its status, where it redirects, and the same-site links in it.

Redirects are not followed: a link checker reports them (``301`` and the ``Location``), and the
target, when it is on the same site, is a link like any other that the crawl checks in turn. A
cross-site redirect is never fetched, so a crawl never leaves its site.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

from jobs_linkcheck.crawl import extract_links, normalize, same_site

__all__ = ["MAX_BODY_BYTES", "PageResult", "fetch_page", "private_address"]

MAX_BODY_BYTES = 2 * 1024 * 1024
"""Only the first 2 MiB of a page are read for links."""

USER_AGENT = "jobs-linkcheck/0.1 (+examples/linkcheck)"


@dataclass(frozen=True, slots=True)
class PageResult:
    """What one fetch found. ``status_code`` is None when no response came (``error`` says
    why: a refused connection, a timeout)."""

    url: str
    status_code: int | None
    error: str | None = None
    location: str | None = None
    links: list[str] = field(default_factory=list)

    @property
    def broken(self) -> bool:
        """No response, or a 4xx/5xx status."""
        return self.status_code is None or self.status_code >= 400


def fetch_page(client: httpx.Client, url: str, site: str) -> PageResult:
    """GET ``url`` (no redirect followed) and return its status and same-site links."""
    try:
        with client.stream("GET", url, follow_redirects=False) as response:
            status = response.status_code
            location = response.headers.get("location")
            if location is not None:
                target = normalize(urljoin(url, location))
                links = [target] if target is not None and same_site(target, site) else []
                return PageResult(url, status, location=target or location, links=links)
            content_type = response.headers.get("content-type", "")
            if status >= 400 or not content_type.startswith("text/html"):
                return PageResult(url, status)
            body = _read_capped(response)
    except httpx.HTTPError as error:
        return PageResult(url, None, error=f"{type(error).__name__}: {error}"[:500])
    html = body.decode(response.encoding or "utf-8", errors="replace")
    links = [link for link in extract_links(html, url) if same_site(link, site)]
    return PageResult(url, status, links=links)


def _read_capped(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= MAX_BODY_BYTES:
            break
    return b"".join(chunks)[:MAX_BODY_BYTES]


def private_address(site: str) -> str | None:
    """Why the crawl may not fetch from ``site`` (``host[:port]``): one of its addresses is not
    public (loopback, private, link-local, ...), or it does not resolve. None when it may.

    The API checks this when a crawl starts and every fetch job before it connects, so a
    crawl cannot be aimed at the deployment's own network (server-side request forgery),
    unless the deployment sets ``JOBS_LINKCHECK_ALLOW_PRIVATE=1`` (development, tests).
    """
    host = urlsplit(f"//{site}").hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as error:
        return f"{host!r} does not resolve: {error}"
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if not address.is_global:
            return f"{host!r} resolves to {address}, which is not a public address"
    return None
