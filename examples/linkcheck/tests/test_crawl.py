"""The crawl's logic without jobs: URLs, links, the frontier, and fetching from a real server."""

from __future__ import annotations

import json

import httpx
import pytest
from jobs_linkcheck.crawl import (
    MAX_URL_CHARS,
    Frontier,
    extract_links,
    normalize,
    same_site,
    site_of,
)
from jobs_linkcheck.fetch import PageResult, fetch_page

from examples.linkcheck.tests.site import Page, serving, small_site


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM", "http://example.com/"),
        ("https://example.com:443/a?b=1#frag", "https://example.com/a?b=1"),
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("http://[::1]:81/", "http://[::1]:81/"),
        ("mailto:a@b.c", None),
        ("/relative", None),
        ("http://example.com:notaport/", None),
        ("ftp://example.com/", None),
    ],
)
def test_normalize(url: str, expected: str | None) -> None:
    assert normalize(url) == expected


def test_site_and_same_site() -> None:
    assert site_of("http://127.0.0.1:8123/a") == "127.0.0.1:8123"
    assert site_of("https://Example.com:443/") == "example.com"
    assert same_site("http://example.com/x", "example.com")
    assert not same_site("http://example.com:81/x", "example.com")
    assert not same_site("mailto:x@example.com", "example.com")
    with pytest.raises(ValueError, match="not an absolute"):
        site_of("example.com")


def test_extract_links_resolves_dedupes_and_drops_non_http() -> None:
    html = """<base href="/docs/"><a href="a">1</a><a href="/b#x">2</a><a href="a">again</a>
    <a href="mailto:x@y.z">m</a><a href="javascript:void(0)">j</a><a>no href</a>
    <link href="/style.css"><a href="https://other.example/">o</a>"""
    assert extract_links(html, "http://site.test/index.html") == [
        "http://site.test/docs/a",
        "http://site.test/b",
        "https://other.example/",
    ]


def test_frontier_walk_respects_the_page_limit_and_the_site() -> None:
    frontier = Frontier.start("http://s.test/", max_pages=3)
    assert frontier.site == "s.test"
    assert frontier.hand_out(10) == ["http://s.test/"]
    assert frontier.hand_out(10) == []
    frontier.settle(
        "http://s.test/",
        ["http://s.test/a", "http://other.test/", "http://s.test/", "http://s.test/b", "/c"],
    )
    assert frontier.frontier == ["http://s.test/a", "http://s.test/b"]
    frontier.settle("http://s.test/", ["http://s.test/z"])  # a replay: nothing changes
    assert frontier.seen == 3
    assert frontier.hand_out(1) == ["http://s.test/a"]
    frontier.settle("http://s.test/a", ["http://s.test/c", "http://s.test/d"])
    assert frontier.dropped == 2  # the limit of three pages is reached
    assert not frontier.finished
    frontier.settle("http://s.test/b", [])  # not handed out yet: ignored
    assert frontier.hand_out(5) == ["http://s.test/b"]
    frontier.settle("http://s.test/b", [])
    assert frontier.finished
    assert frontier.done == ["http://s.test/", "http://s.test/a", "http://s.test/b"]


def test_frontier_round_trips_through_its_json_checkpoint() -> None:
    frontier = Frontier.start("http://s.test/", max_pages=10)
    frontier.hand_out(1)
    frontier.settle("http://s.test/", ["/x", "http://s.test/y", "http://s.test/z"])
    frontier.hand_out(1)
    frontier.discover(["http://s.test/" + "l" * MAX_URL_CHARS])  # too long: dropped
    document = json.loads(json.dumps(frontier.to_checkpoint()))
    assert Frontier.from_checkpoint(document) == frontier
    assert document["pending"] == ["http://s.test/y"]
    assert document["dropped"] == 1


def test_fetch_page_reports_status_links_and_redirects() -> None:
    with serving(small_site()) as site, httpx.Client(timeout=5) as client:
        home = fetch_page(client, site.url("/"), site.site)
        assert home.status_code == 200
        assert not home.broken
        assert home.links == [site.url(p) for p in ("/a", "/b", "/moved", "/missing", "/slow")]

        moved = fetch_page(client, site.url("/moved"), site.site)
        assert (moved.status_code, moved.location, moved.links) == (
            301,
            site.url("/c"),
            [site.url("/c")],
        )
        assert fetch_page(client, site.url("/missing"), site.site).broken
        assert fetch_page(client, site.url("/error"), site.site).status_code == 500
        pdf = fetch_page(client, site.url("/doc.pdf"), site.site)
        assert (pdf.status_code, pdf.links) == (200, [])
        assert site.hits["/c"] == 0  # a redirect is reported, not followed


def test_fetch_page_does_not_follow_a_redirect_off_the_site() -> None:
    pages = {"/": Page(status=302, location="http://elsewhere.invalid/")}
    with serving(pages) as site, httpx.Client(timeout=5) as client:
        result = fetch_page(client, site.url("/"), site.site)
    assert result == PageResult(site.url("/"), 302, location="http://elsewhere.invalid/")


def test_fetch_page_reports_a_refused_connection_and_a_timeout() -> None:
    with serving({}) as site:
        closed = site.url("/")
    with httpx.Client(timeout=5) as client:
        refused = fetch_page(client, closed, site.site)
    assert refused.status_code is None
    assert refused.broken
    assert refused.error is not None
    assert "ConnectError" in refused.error

    with serving({"/": Page(delay_s=1.0)}) as site, httpx.Client(timeout=0.2) as client:
        slow = fetch_page(client, site.url("/"), site.site)
    assert slow.status_code is None
    assert slow.error is not None
    assert "Timeout" in slow.error


def test_a_sequential_crawl_of_the_small_site_checks_every_reachable_page_once() -> None:
    """The frontier and the fetch together, one page at a time: what each job does, in turn."""
    with serving(small_site()) as site, httpx.Client(timeout=5) as client:
        frontier = Frontier.start(site.url("/"), max_pages=50)
        results: dict[str, PageResult] = {}
        while not frontier.finished:
            for url in frontier.hand_out(2):
                results[url] = fetch_page(client, url, site.site)
            for url in list(frontier.pending):
                frontier.settle(url, results[url].links)
        hits = dict(site.hits)
    paths = {"/", "/a", "/b", "/c", "/moved", "/missing", "/error", "/slow", "/d", "/doc.pdf"}
    assert set(results) == {site.url(p) for p in paths}
    assert hits == dict.fromkeys(paths, 1)  # never twice, never /orphan
    broken = {url for url, result in results.items() if result.broken}
    assert broken == {site.url("/missing"), site.url("/error")}
