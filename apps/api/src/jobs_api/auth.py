"""API tokens: issued at random, stored only as a hash with their org, resolved to ``CurrentOrg``.

A token is ``jobs_`` followed by 43 URL-safe characters (``secrets.token_urlsafe(32)``: 256 random
bits). The prefix makes a leaked token recognisable by secret scanners and lets the API refuse a
malformed one without a lookup. Only ``sha256(token)`` is stored (see decision 0005 for why a fast
hash is right for a high-entropy token): whoever reads the token table cannot authenticate.

The CLI issues and revokes tokens with :func:`issue_token` and :func:`revoke_token`; the routes
depend on :data:`CurrentOrgDep`, which asks the store through a :class:`TokenCache`: a token found
live is trusted for ``JOBS_API_TOKEN_CACHE_S`` seconds, so a revocation takes effect within that
time (decision 0005).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Protocol

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jobs_core import Clock, SystemClock, uuid7
from starlette.concurrency import run_in_threadpool

if TYPE_CHECKING:
    from jobs_api.containers import Container

TOKEN_PREFIX = "jobs_"
_TOKEN_BYTES = 32
_TOKEN = re.compile(r"^jobs_[A-Za-z0-9_-]{43}$")

UNAUTHENTICATED_DETAIL = "a valid bearer token is required"
"""The one message of every 401: missing, malformed, unknown and revoked tokens look the same."""


class StoredToken(Protocol):
    """What a token store keeps about a token: never the token itself."""

    @property
    def id(self) -> uuid.UUID:
        """The token's id (what ``jobs token revoke`` may name)."""
        ...

    @property
    def org_id(self) -> str:
        """The org the token acts for."""
        ...

    @property
    def token_hash(self) -> str:
        """``sha256(token)`` in hex."""
        ...

    @property
    def label(self) -> str | None:
        """A note saying what the token is for."""
        ...

    @property
    def created_at(self) -> datetime:
        """When it was issued."""
        ...

    @property
    def revoked_at(self) -> datetime | None:
        """When it was revoked, if it was."""
        ...


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """The in-memory store's :class:`StoredToken`."""

    id: uuid.UUID
    org_id: str
    token_hash: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None = None


class TokenStore(Protocol):
    """Where token hashes live (in memory here, ``api_tokens`` in PostgreSQL:
    ``jobs_postgres.tokens.PostgresTokenStore``)."""

    def create(self, org_id: str, token_hash: str, label: str | None, now: datetime) -> StoredToken:
        """Store a new token hash for the org; ``ValueError`` if the hash is already stored."""
        ...

    def org_for(self, token_hash: str) -> str | None:
        """The org of a live (not revoked) token, or None."""
        ...

    def revoke(self, token_id: uuid.UUID) -> bool:
        """Revoke a token by id; False if there is no live token with that id."""
        ...

    def revoke_hash(self, token_hash: str) -> bool:
        """Revoke a token by its hash; False if there is no live token with that hash."""
        ...

    def list(self, org_id: str) -> Sequence[StoredToken]:
        """The org's tokens, oldest first, revoked ones included."""
        ...


class InMemoryTokenStore:
    """A thread-safe :class:`TokenStore` in a dict, for tests and the ``memory`` store."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._by_hash: dict[str, TokenRecord] = {}
        self._lock = threading.Lock()
        self._clock: Clock = clock or SystemClock()

    @property
    def records(self) -> list[TokenRecord]:
        """Every stored record (what a reader of the store could see)."""
        with self._lock:
            return list(self._by_hash.values())

    def create(self, org_id: str, token_hash: str, label: str | None, now: datetime) -> TokenRecord:
        """Store a new token hash for the org."""
        with self._lock:
            if token_hash in self._by_hash:
                raise ValueError("this token hash is already stored")
            record = TokenRecord(uuid7(), org_id, token_hash, label, now)
            self._by_hash[token_hash] = record
            return record

    def org_for(self, token_hash: str) -> str | None:
        """The org of a live token."""
        with self._lock:
            record = self._by_hash.get(token_hash)
        if record is None or record.revoked_at is not None:
            return None
        return record.org_id

    def revoke(self, token_id: uuid.UUID) -> bool:
        """Revoke by id."""
        with self._lock:
            for record in self._by_hash.values():
                if record.id == token_id:
                    return self._revoke(record)
        return False

    def revoke_hash(self, token_hash: str) -> bool:
        """Revoke by hash."""
        with self._lock:
            record = self._by_hash.get(token_hash)
            return record is not None and self._revoke(record)

    def _revoke(self, record: TokenRecord) -> bool:
        if record.revoked_at is not None:
            return False
        revoked = dataclasses.replace(record, revoked_at=self._clock.now())
        self._by_hash[record.token_hash] = revoked
        return True

    def list(self, org_id: str) -> list[TokenRecord]:
        """The org's tokens, oldest first."""
        with self._lock:
            mine = [r for r in self._by_hash.values() if r.org_id == org_id]
        return sorted(mine, key=lambda r: r.created_at)  # stable: creation order on ties


TOKEN_CACHE_MAX_ENTRIES = 10_000
"""The most live tokens one API process remembers at once (a few MB at most)."""


class OrgLookup(Protocol):
    """What a :class:`TokenCache` asks: the org of a live credential (token or session) by hash."""

    def org_for(self, token_hash: str, /) -> str | None:
        """The org of a live credential, or None."""
        ...


class TokenCache:
    """Which org a live token acts for, remembered for ``ttl_s`` seconds in this process.

    Only a *live* answer is remembered: an unknown or revoked token is asked of the store every
    time, so a made-up token can never be taken for a valid one, and a flood of bad tokens adds
    nothing to memory (at most one entry per live token, ``max_entries`` in all; beyond, the
    oldest entry goes). A token revoked through the store is refused by this process at the
    latest ``ttl_s`` after the lookup that found it live: the entry's life starts *before* that
    lookup, so a lookup racing with the revocation cannot stretch it. ``ttl_s = 0`` remembers
    nothing. Time comes from ``clock`` (a ``FakeClock`` in tests); an entry is also dropped if
    the clock goes back past the moment it was made, so a wall-clock step cannot extend it.
    """

    def __init__(
        self,
        store: OrgLookup,
        clock: Clock,
        ttl_s: float,
        max_entries: int = TOKEN_CACHE_MAX_ENTRIES,
    ) -> None:
        if ttl_s < 0 or max_entries < 1:
            raise ValueError("ttl_s must be >= 0 and max_entries >= 1")
        self.store = store
        self._clock = clock
        self._ttl = timedelta(seconds=ttl_s)
        self._max_entries = max_entries
        # token hash -> (org, made at, expires at), in insertion order: every entry has the
        # same lifetime, so the front is (about) the first to expire and is pruned first.
        self._entries: dict[str, tuple[str, datetime, datetime]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def cached(self, token_hash: str) -> str | None:
        """The org of a token found live less than ``ttl_s`` ago, else None (never blocks on
        the store: safe to call on the event loop)."""
        entry = self._entries.get(token_hash)
        if entry is None:
            return None
        org_id, made_at, expires_at = entry
        if made_at <= self._clock.now() < expires_at:
            return org_id
        with self._lock:
            if self._entries.get(token_hash) is entry:
                del self._entries[token_hash]
        return None

    def org_for(self, token_hash: str) -> str | None:
        """The org of a live token: remembered, else asked of the store (blocking)."""
        org_id = self.cached(token_hash)
        if org_id is not None:
            return org_id
        if not self._ttl:
            return self.store.org_for(token_hash)
        made_at = self._clock.now()
        org_id = self.store.org_for(token_hash)
        if org_id is not None:
            self._remember(token_hash, org_id, made_at)
        return org_id

    def forget(self, token_hash: str) -> None:
        """Drop what is remembered of a credential (a session signed out in this process)."""
        with self._lock:
            self._entries.pop(token_hash, None)

    def _remember(self, token_hash: str, org_id: str, made_at: datetime) -> None:
        with self._lock:
            entries = self._entries
            entries.pop(token_hash, None)
            now = self._clock.now()
            while entries:  # drop the expired entries at the front
                first = next(iter(entries))
                _, first_made, first_expires = entries[first]
                if first_made <= now < first_expires:
                    break
                del entries[first]
            while len(entries) >= self._max_entries:
                del entries[next(iter(entries))]
            entries[token_hash] = (org_id, made_at, made_at + self._ttl)


def hash_token(token: str) -> str:
    """The stored form of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_well_formed(token: str) -> bool:
    """True if ``token`` has the shape of a token this system issues."""
    return _TOKEN.fullmatch(token) is not None


def new_token() -> str:
    """A fresh random token (256 bits of entropy, recognisable prefix)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)


def issue_token(
    store: TokenStore, org_id: str, label: str | None, now: datetime
) -> tuple[str, StoredToken]:
    """Create a token for ``org_id``: the plain token (show it once, it is never stored) and
    the stored record."""
    org_id = org_id.strip()
    if not org_id:
        raise ValueError("org_id must not be empty")
    token = new_token()
    record = store.create(org_id, hash_token(token), label, now)
    return token, record


def revoke_token(store: TokenStore, token_or_id: str) -> bool:
    """Revoke a token given either the plain token or its record id; False if nothing live
    matched. Raises ``ValueError`` when ``token_or_id`` is neither."""
    value = token_or_id.strip()
    if value.startswith(TOKEN_PREFIX):
        return store.revoke_hash(hash_token(value))
    try:
        token_id = uuid.UUID(value)
    except ValueError:
        raise ValueError(
            f"{token_or_id!r} is neither a token ({TOKEN_PREFIX}...) nor a token id"
        ) from None
    return store.revoke(token_id)


# ---- FastAPI ---------------------------------------------------------------------------------

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="BearerToken",
    description="An API token created with `jobs token create --org ORG`.",
)


def _unauthenticated() -> HTTPException:
    return HTTPException(
        status_code=401,
        detail=UNAUTHENTICATED_DETAIL,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _token_hash(credentials: HTTPAuthorizationCredentials | None) -> str:
    """The hash to look up; 401 at once for a missing or malformed token (no lookup)."""
    if credentials is None or not is_well_formed(credentials.credentials):
        raise _unauthenticated()
    return hash_token(credentials.credentials)


def _token_cache(request: Request) -> TokenCache:
    container: Container = request.app.state.container
    return container.token_cache()


def _authenticated(request: Request) -> str | None:
    """The org :class:`jobs_api.guard.AuthenticateFirst` resolved before the body was read."""
    org_id = getattr(request.state, "jobs_org", None)
    return org_id if isinstance(org_id, str) else None


async def current_org(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The org of the request's bearer token; 401 for a missing, malformed, unknown or revoked
    token, always with the same body.

    A remembered token is answered on the event loop; only a lookup in the store goes to the
    thread pool (a sync dependency would cost a thread hand-off on every request). Behind
    :class:`jobs_api.guard.AuthenticateFirst` the org is already resolved: taken from the state.
    """
    authenticated = _authenticated(request)
    if authenticated is not None:
        return authenticated
    return await resolve_org(request, credentials)


async def resolve_org(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str:
    """:func:`current_org` without the org the guard left in the request state: a fresh answer,
    for a long request (the event stream) that checks again that its token still holds."""
    if credentials is None:
        from jobs_api.sessions import session_cookie, session_org

        cookie = session_cookie(request)
        session = None if cookie is None else await session_org(request, cookie)
        if session is None:
            raise _unauthenticated()
        return session
    token_hash = _token_hash(credentials)
    cache = _token_cache(request)
    org_id = cache.cached(token_hash)
    if org_id is None:
        org_id = await run_in_threadpool(cache.org_for, token_hash)
    if org_id is None:
        raise _unauthenticated()
    return org_id


def current_org_blocking(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """:func:`current_org` as a plain function (FastAPI runs it in the thread pool), for the
    routers of modules that take a synchronous dependency (``jobs_imports.api``)."""
    authenticated = _authenticated(request)
    if authenticated is not None:
        return authenticated
    if credentials is None:
        from jobs_api.sessions import session_cookie, session_org_blocking

        cookie = session_cookie(request)
        session = None if cookie is None else session_org_blocking(request, cookie)
        if session is None:
            raise _unauthenticated()
        return session
    org_id = _token_cache(request).org_for(_token_hash(credentials))
    if org_id is None:
        raise _unauthenticated()
    return org_id


CurrentOrgDep = Annotated[str, Depends(current_org)]
"""The org the request acts for, resolved from ``Authorization: Bearer <token>``, else from the
browser session cookie (docs/sessions.md: a write must then send ``X-CSRF-Token``)."""
