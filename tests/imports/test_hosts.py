"""Site target hosts: public ones only, whatever the spelling of a private address (SSRF)."""

from __future__ import annotations

import pytest
from jobs_imports.hosts import non_public_reason
from jobs_imports.urls import normalize_url


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost/",
        "http://LOCALHOST./admin",
        "http://api.localhost/",
        "http://printer.local/",
        "http://metadata.google.internal/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://0.0.0.0/",
        "http://2130706433/",  # 127.0.0.1 as one decimal number
        "http://0x7f.1/",  # hex, short form
        "http://0177.0.0.1/",  # octal
        "http://127.1/",  # short form
        "http://0x7f000001/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
        "http://[::ffff:a9fe:a9fe]/",  # 169.254.169.254, mapped, in hex
        "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
        "http://[2002:c0a8:101::1]/",  # 6to4 of 192.168.1.1
        "http://[fd00::1]/",  # unique local
        "http://[fe80::1]/",  # link local
        "http://224.0.0.1/",  # multicast
        "http://192.0.2.10/",  # documentation
        "http://1.2.3.999/",  # not an address at all
    ],
)
def test_non_public_hosts_are_refused_in_any_spelling(url: str) -> None:
    assert non_public_reason(normalize_url(url)) is not None


@pytest.mark.parametrize(
    "url",
    [
        "https://www.example.com/",
        "https://8.8.8.8/",
        "https://[2606:4700:4700::1111]/",
        "https://xn--caf-dma.fr/",
        "https://local.example.com/",  # "local" as a label, not the suffix
        "https://1password.com/",  # a name that starts with digits
    ],
)
def test_public_hosts_pass(url: str) -> None:
    assert non_public_reason(normalize_url(url)) is None
