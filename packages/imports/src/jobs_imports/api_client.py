"""Fetching one page of search-analytics rows from a site target's API source, with httpx.

The source speaks paginated JSON, the Search Console way (docs/imports.md, "API imports"):

    GET <base_url>?start_date=2025-01-01&end_date=2025-01-31[&cursor=<next_cursor>]
    Authorization: Bearer <token>
    -> 200 {"rows": [{"page": ..., "query": ..., "date": ..., "clicks": ..., ...}],
            "next_cursor": "<opaque string>" | null}

What an answer means for the job, decided here and nowhere else:

- 200 with a JSON object holding a ``rows`` list: the page (:class:`Page`);
- 429, or 503 with ``Retry-After``: :class:`~jobs_core.errors.Snooze` for that long (clamped to
  ``max_retry_after_s``; 429 without it: ``default_retry_after_s``) — no attempt spent;
- any other 5xx, a timeout, a refused or broken connection: :class:`SourceUnavailable`, which
  the type's retry policy re-queues with backoff;
- 3xx (never followed: the token must not travel to another URL), 4xx, a body that is not JSON
  or not a page, a page larger than ``max_page_bytes``: :class:`SourceError`, the job fails
  with that message.

No message ever holds the token or a response body (which might echo it): the status, the
reason and the URL without its query say what went wrong.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from jobs_core.errors import Snooze

if TYPE_CHECKING:
    import httpx

__all__ = ["ApiSettings", "Page", "SourceError", "SourceUnavailable", "fetch_page"]


class SourceError(Exception):
    """The API source's answer cannot be imported (4xx, not JSON, too large, a cursor loop):
    retrying would not change it, the import fails with this message."""


class SourceUnavailable(Exception):
    """The API source did not answer usefully this time (5xx, timeout, connection refused):
    ``import_api`` retries it with backoff (its RetryPolicy)."""


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """The limits of ``import_api`` (docs/configuration.md: ``JOBS_IMPORTS_API_*``)."""

    timeout_s: float = 30.0
    """Connect, read and write timeout of one request."""
    page_deadline_s: float = 120.0
    """The longest one page may take to arrive in full (a source dripping bytes is cut)."""
    max_page_bytes: int = 8 * 1024 * 1024
    """The largest page body read; a larger one fails the import (ask for smaller pages)."""
    max_retry_after_s: float = 3600.0
    """The longest ``Retry-After`` obeyed; a longer one is cut to this."""
    default_retry_after_s: float = 60.0
    """How long a 429 without ``Retry-After`` snoozes."""

    _VARIABLES = {
        "timeout_s": "JOBS_IMPORTS_API_TIMEOUT_S",
        "page_deadline_s": "JOBS_IMPORTS_API_PAGE_DEADLINE_S",
        "max_page_bytes": "JOBS_IMPORTS_API_MAX_PAGE_BYTES",
        "max_retry_after_s": "JOBS_IMPORTS_API_MAX_RETRY_AFTER_S",
    }

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> ApiSettings:
        """The settings named in ``settings`` (a module context's), defaults for the others;
        ``ValueError`` naming the variable when one is not a positive number."""
        values: dict[str, Any] = {}
        for name, variable in cls._VARIABLES.items():
            text = settings.get(variable, "").strip()
            if not text:
                continue
            try:
                value = int(text) if name == "max_page_bytes" else float(text)
            except ValueError:
                value = 0
            if not value > 0:
                raise ValueError(f"{variable}: not a positive number: {text!r}")
            values[name] = value
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of the source: its rows (as sent) and the cursor of the next one (None: last)."""

    rows: list[Any]
    next_cursor: str | None


def public_url(url: str) -> str:
    """``url`` without its query and fragment: what a message may show."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.hostname or "", parts.path, "", ""))


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _read_body(response: httpx.Response, settings: ApiSettings, where: str) -> bytes:
    """The body, at most ``max_page_bytes`` and within ``page_deadline_s``, or SourceError."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > settings.max_page_bytes:
        raise SourceError(_too_large(where, settings))
    deadline = time.monotonic() + settings.page_deadline_s
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > settings.max_page_bytes:
            raise SourceError(_too_large(where, settings))
        if time.monotonic() > deadline:
            raise SourceUnavailable(
                f"the API source took more than {settings.page_deadline_s:g} s to send a page "
                f"({where}; JOBS_IMPORTS_API_PAGE_DEADLINE_S)"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(where: str, settings: ApiSettings) -> str:
    return (
        f"the API source sent a page larger than {settings.max_page_bytes} bytes ({where}): "
        "ask it for smaller pages, or raise JOBS_IMPORTS_API_MAX_PAGE_BYTES"
    )


def _refused(status: int, reason: str, where: str) -> SourceError:
    if status in (401, 403):
        advice = "its token is refused: configure the site target's API source with a valid one"
    elif status == 404:
        advice = "no such resource: check the API source's base URL"
    elif 300 <= status < 400:
        advice = "redirects are not followed: configure the URL it redirects to"
    else:
        advice = "the request was refused"
    return SourceError(f"the API source answered HTTP {status} {reason} ({where}): {advice}")


def _page_of(body: bytes, where: str) -> Page:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise SourceError(
            f"the API source sent a page that is not JSON ({where}): {error}"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("rows", []), list):
        raise SourceError(
            f"the API source sent JSON that is not a page ({where}): "
            'expected an object with a "rows" list and a "next_cursor"'
        )
    cursor = document.get("next_cursor")
    if cursor is not None and (not isinstance(cursor, str) or not cursor or len(cursor) > 2000):
        raise SourceError(
            f"the API source sent an unusable next_cursor ({where}): "
            "expected a string of 1 to 2000 characters, or null on the last page"
        )
    return Page(rows=list(document.get("rows", [])), next_cursor=cursor)


def fetch_page(
    client: httpx.Client,
    *,
    base_url: str,
    token: str,
    start: date,
    end: date,
    cursor: str | None,
    settings: ApiSettings,
    page_no: int,
) -> Page:
    """One page at ``cursor`` (None: the first), or the exception its answer means (above)."""
    import httpx  # here, not at the top: see client_for

    params = {"start_date": start.isoformat(), "end_date": end.isoformat()}
    if cursor is not None:
        params["cursor"] = cursor
    where = f"page {page_no} of {public_url(base_url)}"
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    try:
        with client.stream("GET", base_url, params=params, headers=headers) as response:
            status = response.status_code
            if status == 429 or (status == 503 and "retry-after" in response.headers):
                wait = retry_after(response.headers.get("retry-after"))
                wait = settings.default_retry_after_s if wait is None else wait
                wait = min(wait, settings.max_retry_after_s)
                raise Snooze(wait, f"the API source asked to wait {wait:g} s (HTTP {status})")
            if status >= 500:
                raise SourceUnavailable(
                    f"the API source answered HTTP {status} {response.reason_phrase} ({where})"
                )
            if status != 200:
                raise _refused(status, response.reason_phrase, where)
            body = _read_body(response, settings, where)
    except httpx.TimeoutException as error:
        raise SourceUnavailable(
            f"the API source did not answer within {settings.timeout_s:g} s ({where}; "
            f"JOBS_IMPORTS_API_TIMEOUT_S): {type(error).__name__}"
        ) from None
    except httpx.TransportError as error:
        raise SourceUnavailable(
            f"the API source could not be reached ({where}): {type(error).__name__}"
        ) from None
    return _page_of(body, where)


def client_for(settings: ApiSettings) -> httpx.Client:
    """The HTTP client of one attempt: the timeouts, no redirects, no proxy from the
    environment (the token goes to the configured URL only).

    httpx is imported by the first attempt, not with the module: every worker serving the
    Imports module imports it at start, and httpx brings its command line's rich, click and
    pygments (about 0.12 s of a worker's 1.2 s start-up on the 2-core machine)."""
    import httpx

    return httpx.Client(
        timeout=httpx.Timeout(settings.timeout_s),
        follow_redirects=False,
        trust_env=False,
    )
