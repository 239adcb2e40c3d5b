"""URL normalization: one key per page, whatever the spelling of the export."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobs_imports.urls import InvalidUrl, normalize_url

from tests.profiles import scaled

BASE = "https://www.example.com/"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # scheme and host lowercased, default port dropped, fragment dropped
        ("HTTPS://WWW.Example.COM/Path", "https://www.example.com/Path"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),
        ("https://example.com/a#section-2", "https://example.com/a"),
        ("https://example.com./a", "https://example.com/a"),
        ("  https://example.com/a \t", "https://example.com/a"),
        # trailing slash: dropped except for the root
        ("https://example.com", "https://example.com/"),
        ("https://example.com/", "https://example.com/"),
        ("https://example.com/blog/", "https://example.com/blog"),
        ("https://example.com/blog//", "https://example.com/blog"),
        # dot segments
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/../a", "https://example.com/a"),
        # query: tracking parameters dropped, the rest sorted, an empty query gone
        (
            "https://example.com/p?utm_source=x&UTM_Medium=y&b=2&a=1",
            "https://example.com/p?a=1&b=2",
        ),
        ("https://example.com/p?gclid=abc&fbclid=d&msclkid=e", "https://example.com/p"),
        ("https://example.com/p?", "https://example.com/p"),
        ("https://example.com/p?b=&a", "https://example.com/p?a&b="),
        ("https://example.com/p?q=a+b&q=a%20b", "https://example.com/p?q=a%20b&q=a+b"),
        ("https://example.com/p?x=1&x=0", "https://example.com/p?x=0&x=1"),
        # percent-encoding: unreserved decoded, the rest uppercased, what must be escaped is
        ("https://example.com/%7Euser/%41", "https://example.com/~user/A"),
        ("https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"),
        ("https://example.com/café", "https://example.com/caf%C3%A9"),
        ("https://example.com/a b", "https://example.com/a%20b"),
        ("https://example.com/a%2Fb", "https://example.com/a%2Fb"),
        ("https://example.com/100%", "https://example.com/100%25"),
        ("https://example.com/p?q=caf%c3%a9", "https://example.com/p?q=caf%C3%A9"),
        # internationalized host
        ("https://café.fr/", "https://xn--caf-dma.fr/"),
        ("https://XN--CAF-DMA.fr/", "https://xn--caf-dma.fr/"),
        # path case is kept: paths are case-sensitive
        ("https://example.com/About", "https://example.com/About"),
        ("https://[2001:DB8::1]:443/x", "https://[2001:db8::1]/x"),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/blog/post/", "https://www.example.com/blog/post"),
        ("blog/post", "https://www.example.com/blog/post"),
        ("//cdn.example.com/x", "https://cdn.example.com/x"),
        ("https://other.example.org/x", "https://other.example.org/x"),
    ],
)
def test_relative_urls_resolve_against_the_base(raw: str, expected: str) -> None:
    assert normalize_url(raw, BASE) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/relative/without/base", "not absolute"),
        ("ftp://example.com/file", "unsupported scheme 'ftp'"),
        ("mailto:someone@example.com", "unsupported scheme 'mailto'"),
        ("https://", "no host"),
        ("https://exa mple.com/", "invalid host"),
        ("https://example.com:99999/", "unparsable"),
        ("https://example.com/a\nb", "control characters"),
        ("https://example.com/" + "a" * 9000, "longer than"),
    ],
)
def test_unusable_values_raise_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(InvalidUrl, match=reason):
        normalize_url(raw)


URL_PARTS = st.builds(
    lambda scheme, host, port, path, query, fragment: (
        f"{scheme}://{host}{port}{path}{query}{fragment}"
    ),
    st.sampled_from(["http", "https", "HTTPS"]),
    st.sampled_from(["example.com", "WWW.Example.com", "café.fr", "a.b.c.example"]),
    st.sampled_from(["", ":80", ":443", ":8080"]),
    st.lists(st.text(alphabet="abcAB09-._~%20é /", min_size=0, max_size=6), max_size=4).map(
        lambda segments: "/" + "/".join(segments)
    ),
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "utm_source", "gclid", "Q"]),
            st.text(alphabet="xy1%2é+=", max_size=4),
        ),
        max_size=3,
    ).map(lambda pairs: ("?" + "&".join(f"{k}={v}" for k, v in pairs)) if pairs else ""),
    st.sampled_from(["", "#top", "#"]),
)


@settings(max_examples=scaled(300))
@given(URL_PARTS)
def test_normalizing_is_idempotent(raw: str) -> None:
    """A normalized URL is a fixed point: the key never drifts on a second pass."""
    try:
        once = normalize_url(raw)
    except InvalidUrl:
        return
    assert normalize_url(once) == once
    assert "#" not in once
    assert "utm_" not in once.lower()
    assert once == once.strip()
