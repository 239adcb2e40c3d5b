"""Which hosts a site target may name: public ones only (a crawler fetching the site's pages
must never be pointed at the internal network: SSRF).

:func:`non_public_reason` is pure (no DNS): it refuses what is knowable from the URL alone —

- every IP literal outside the public unicast space (loopback, private, link-local, shared
  carrier-grade NAT, unspecified, multicast, reserved, documentation ranges; for IPv6 also
  unique-local, and IPv4 addresses embedded in IPv6: mapped ``::ffff:a.b.c.d``, NAT64, 6to4),
  spelled in any form a resolver or browser accepts for IPv4: ``2130706433``, ``0x7f.1``,
  ``0177.0.0.1``, ``127.1`` all mean 127.0.0.1;
- names that never leave the machine or the site: ``localhost`` and ``*.localhost``, and the
  special-use suffixes ``.local``, ``.internal``, ``.home.arpa``, ``.lan``, ``.intranet``,
  ``.corp``, ``.private``.

A public name may still resolve to a private address (or be re-pointed later: DNS rebinding),
so whatever fetches a site's pages must check the address it connects to again; this check is
the first line, at the door. ``JOBS_ALLOW_PRIVATE_URLS=1`` turns it off for development.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

__all__ = ["non_public_reason"]

_LOCAL_NAMES = ("localhost",)
_LOCAL_SUFFIXES = (
    ".localhost",
    ".local",
    ".internal",
    ".home.arpa",
    ".lan",
    ".intranet",
    ".corp",
    ".private",
)
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _ipv4_of(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host spells in any form ``inet_aton`` (and browsers) accept, or None
    for a name. A host whose last label is numeric is an address or nothing (WHATWG URL)."""
    labels = host.split(".")
    if not _NUMERIC_LABEL.match(labels[-1]):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        raise ValueError(f"{host!r} is not a valid IPv4 address") from None


def _address_reason(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return _address_reason(embedded)
    if address.is_loopback:
        return f"{address} is a loopback address"
    if address.is_link_local:
        return f"{address} is a link-local address"
    if address.is_private or not address.is_global:
        return f"{address} is a private or reserved address"
    if address.is_multicast:
        return f"{address} is a multicast address"
    return None


def non_public_reason(url: str) -> str | None:
    """Why ``url``'s host is not a public internet host, or None when it may be."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if not host:
        return "the URL has no host"
    if host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES):
        return f"{host} is a local name, not a public host"
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = (
            ipaddress.IPv6Address(host.split("%", 1)[0]) if ":" in host else _ipv4_of(host)
        )
    except ValueError as error:
        return str(error)
    if address is None:
        return None
    return _address_reason(address)
