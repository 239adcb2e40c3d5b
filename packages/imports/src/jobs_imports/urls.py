"""URL normalization: the key that maps an imported row to a page of its site target.

Two spellings of one page must give one key, and two pages must never share one. The rules:

- surrounding whitespace is dropped; only ``http`` and ``https`` URLs are accepted (a relative
  URL is resolved against ``base``, the site target's base URL, when one is given);
- scheme and host are lowercased, an internationalized host is IDNA-encoded (``café.fr`` and
  ``xn--caf-dma.fr`` are one host), a trailing dot of the host is dropped, and so is the default
  port (``:80`` for http, ``:443`` for https);
- the fragment is dropped (it never reaches the server);
- the path keeps its case (paths are case-sensitive); dot segments are resolved; an empty path
  becomes ``/``; **a trailing slash is dropped except for the root** (``/blog/`` and ``/blog`` are
  one page: sites redirect one to the other, and search consoles report either);
- percent-encoding is normalized: escapes of unreserved characters are decoded (``%7E`` → ``~``),
  the remaining escapes are uppercased (``%c3%a9`` → ``%C3%A9``), and characters that must be
  escaped are (``é`` → ``%C3%A9``, a space → ``%20``);
- the query drops tracking parameters (``utm_*`` and the ad-click ids ``gclid``, ``fbclid``,
  ``msclkid``, ``dclid``, ``gbraid``, ``wbraid``, ``yclid``) and sorts the rest by key then value;
  an empty query disappears with its ``?``;
- a URL longer than :data:`MAX_NORMALIZED_URL_LENGTH` (2,048) characters once normalized is
  invalid.

The function is pure (no I/O) and total on strings: a value that is not a usable URL raises
:class:`InvalidUrl` with a reason, which the import reports for the row.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

__all__ = ["MAX_NORMALIZED_URL_LENGTH", "TRACKING_PARAMETERS", "InvalidUrl", "normalize_url"]


class InvalidUrl(ValueError):
    """The value is not an absolute http(s) URL (or a path resolvable against a base)."""


TRACKING_PARAMETERS = frozenset(
    {"gclid", "fbclid", "msclkid", "dclid", "gbraid", "wbraid", "yclid"}
)
"""Query keys dropped besides every ``utm_*`` key: they identify a click, never a page."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX = frozenset("0123456789abcdefABCDEF")
# Characters left as they are in a path (RFC 3986 pchar and "/"), besides unreserved ones.
_PATH_SAFE = frozenset("!$&'()*+,;=:@/")
# In a query key or value "&", "=" and "+" carry meaning; "+" is kept as written.
_QUERY_SAFE = frozenset("!$'()*+,;:@/?")
_MAX_URL_LENGTH = 8192
MAX_NORMALIZED_URL_LENGTH = 2048
"""The longest normalized URL kept (the sitemap protocol's limit): a longer one is an invalid URL,
never a key too long for the indexes that hold it (PostgreSQL's btree refuses entries over
~2.7 kB)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _normalize_escapes(text: str, safe: frozenset[str]) -> str:
    """Decode escapes of unreserved characters, uppercase the others, escape what must be."""
    out: list[str] = []
    i = 0
    length = len(text)
    while i < length:
        char = text[i]
        if char == "%" and i + 2 < length and text[i + 1] in _HEX and text[i + 2] in _HEX:
            decoded = chr(int(text[i + 1 : i + 3], 16))
            out.append(decoded if decoded in _UNRESERVED else "%" + text[i + 1 : i + 3].upper())
            i += 3
            continue
        if char in _UNRESERVED or char in safe:
            out.append(char)
        else:
            # "%" not followed by two hex digits is a literal percent sign: escape it too.
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, on an absolute path."""
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
            continue
        if segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
            continue
        output.append(segment)
    result = "/".join(output)
    return result if result.startswith("/") else "/" + result


def _normalize_host(host: str) -> str:
    host = host.rstrip(".").lower()
    if not host:
        raise InvalidUrl("the URL has no host")
    if ":" in host:  # an IPv6 literal (urlsplit strips its brackets): lowercase is all it needs
        return f"[{host}]"
    if host.isascii():
        if not re.fullmatch(r"[a-z0-9._-]+", host):
            raise InvalidUrl(f"invalid host {host!r}")
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as error:
        raise InvalidUrl(f"invalid internationalized host {host!r}") from error


def _normalize_query(query: str) -> str:
    if not query:
        return ""
    pairs: list[tuple[str, str]] = []
    for part in query.split("&"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = _normalize_escapes(key, _QUERY_SAFE)
        if key.lower().startswith("utm_") or key.lower() in TRACKING_PARAMETERS:
            continue
        pairs.append((key, sep + _normalize_escapes(value, _QUERY_SAFE)))
    pairs.sort()
    return "&".join(key + rest for key, rest in pairs)


def normalize_url(raw: str, base: str | None = None) -> str:
    """The normalized form of ``raw`` (see the module docstring), or :class:`InvalidUrl`.

    ``base`` resolves a relative URL (``/blog/post``, ``//host/x``): pass the site target's base
    URL so that exports listing paths map to the same pages as exports listing full URLs.
    """
    return _normalize(raw, base)


@lru_cache(maxsize=65536)
def _normalize(raw: str, base: str | None) -> str:
    # Cached: an export has many rows per URL (one per query or per day); the cache is bounded.
    text = raw.strip()
    if not text:
        raise InvalidUrl("the URL is empty")
    if len(text) > _MAX_URL_LENGTH:
        raise InvalidUrl(f"the URL is longer than {_MAX_URL_LENGTH} characters")
    if _CONTROL.search(text):
        raise InvalidUrl("the URL contains control characters")
    try:
        parts = urlsplit(text)
        if not parts.scheme and base is not None:
            parts = urlsplit(urljoin(base, text))
        port = parts.port
    except ValueError as error:
        raise InvalidUrl(f"unparsable URL: {error}") from error
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        if not scheme:
            raise InvalidUrl("the URL is not absolute (no scheme such as https://)")
        raise InvalidUrl(f"unsupported scheme {scheme!r} (only http and https)")
    host = _normalize_host(parts.hostname or "")
    netloc = host
    if parts.username is not None:
        userinfo = _normalize_escapes(parts.username, frozenset("!$&'()*+,;="))
        if parts.password is not None:
            userinfo += ":" + _normalize_escapes(parts.password, frozenset("!$&'()*+,;="))
        netloc = f"{userinfo}@{host}"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = _normalize_escapes(parts.path, _PATH_SAFE) or "/"
    if not path.startswith("/"):
        path = "/" + path
    path = _remove_dot_segments(path)
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    query = _normalize_query(parts.query)
    normalized = f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
    if len(normalized) > MAX_NORMALIZED_URL_LENGTH:
        raise InvalidUrl(
            f"the URL is longer than {MAX_NORMALIZED_URL_LENGTH} characters once normalized "
            f"({len(normalized)})"
        )
    return normalized
