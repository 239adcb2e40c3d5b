"""jobs-tokens: API tokens and the browser sessions opened with them, the credential component
that the API (which resolves them to an org) and the CLI (which issues and revokes them) both
use. A package of its own, beside jobs-core (decision 0030): credentials are not the job domain.

A token is ``jobs_`` followed by 43 URL-safe characters (``secrets.token_urlsafe(32)``: 256 random
bits). The prefix makes a leaked token recognisable by secret scanners and lets the API refuse a
malformed one without a lookup. Only ``sha256(token)`` is stored (decision 0005 says why a fast
hash is right for a high-entropy token): whoever reads the token table cannot authenticate. A
session (docs/sessions.md) is stored the same way, as the hash of its cookie, with the token it
was opened with: revoking the token ends its sessions.

Here: the ports (:class:`TokenStore`, :class:`SessionStore`), the in-memory adapters, the use
cases :func:`issue_token` and :func:`revoke_token`, and :class:`TokenCache` (which org a live
credential acts for, remembered for a few seconds). The PostgreSQL adapters are
``jobs_postgres.tokens`` and ``jobs_postgres.sessions``; the HTTP side is ``jobs_api.auth``.
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
from typing import Protocol

from jobs_core.clock import SystemClock, uuid7
from jobs_core.ports import Clock

TOKEN_PREFIX = "jobs_"
_TOKEN_BYTES = 32
_TOKEN = re.compile(r"^jobs_[A-Za-z0-9_-]{43}$")


def hash_token(token: str) -> str:
    """The stored form of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def hash_session(cookie: str) -> str:
    """The stored form of a session cookie: its SHA-256, in hex."""
    return hashlib.sha256(cookie.encode()).hexdigest()


def is_well_formed(token: str) -> bool:
    """True if ``token`` has the shape of a token this system issues."""
    return _TOKEN.fullmatch(token) is not None


def new_token() -> str:
    """A fresh random token (256 bits of entropy, recognisable prefix)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)


# ---- the token port ---------------------------------------------------------------------------


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
    """A :class:`StoredToken` as the stores return it."""

    id: uuid.UUID
    org_id: str
    token_hash: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None = None


class TokenStore(Protocol):
    """Where token hashes live (:class:`InMemoryTokenStore`; ``api_tokens`` in PostgreSQL:
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


# ---- the use cases ----------------------------------------------------------------------------


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


# ---- sessions ---------------------------------------------------------------------------------


class SessionStore(Protocol):
    """Where browser sessions live (:class:`InMemorySessionStore`; ``api_sessions`` in
    PostgreSQL: ``jobs_postgres.sessions.PostgresSessionStore``). Only hashes are passed in."""

    def open(
        self, token_hash: str, session_hash: str, now: datetime, expires_at: datetime
    ) -> str | None:
        """Open a session for a live token; its org, or None if the token is not live."""
        ...

    def org_for(self, session_hash: str) -> str | None:
        """The org of a live session (not ended, not expired, its token not revoked)."""
        ...

    def end(self, session_hash: str, now: datetime) -> bool:
        """End a session; False if it was not live."""
        ...

    def expires_at(self, session_hash: str) -> datetime | None:
        """When a stored session expires (None if unknown)."""
        ...


class OrgLookup(Protocol):
    """What a :class:`TokenCache` asks: the org of a live credential (token or session) by hash."""

    def org_for(self, token_hash: str, /) -> str | None:
        """The org of a live credential, or None."""
        ...


@dataclass(frozen=True, slots=True)
class _Session:
    token_hash: str
    org_id: str
    expires_at: datetime
    ended_at: datetime | None = None


class InMemorySessionStore:
    """A thread-safe :class:`SessionStore` over the token store its sessions are opened with."""

    def __init__(self, tokens: OrgLookup, clock: Clock) -> None:
        self._tokens = tokens
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def open(
        self, token_hash: str, session_hash: str, now: datetime, expires_at: datetime
    ) -> str | None:
        """Open a session for a live token."""
        org_id = self._tokens.org_for(token_hash)
        if org_id is None:
            return None
        with self._lock:
            self._sessions[session_hash] = _Session(token_hash, org_id, expires_at)
        return org_id

    def org_for(self, session_hash: str) -> str | None:
        """The org of a live session of a live token."""
        with self._lock:
            session = self._sessions.get(session_hash)
        if session is None or session.ended_at is not None:
            return None
        if self._clock.now() >= session.expires_at:
            return None
        if self._tokens.org_for(session.token_hash) is None:
            return None
        return session.org_id

    def end(self, session_hash: str, now: datetime) -> bool:
        """End a session."""
        with self._lock:
            session = self._sessions.get(session_hash)
            if session is None or session.ended_at is not None:
                return False
            self._sessions[session_hash] = dataclasses.replace(session, ended_at=now)
            return True

    def expires_at(self, session_hash: str) -> datetime | None:
        """When a stored session expires."""
        with self._lock:
            session = self._sessions.get(session_hash)
        return None if session is None else session.expires_at


# ---- the cache --------------------------------------------------------------------------------

TOKEN_CACHE_MAX_ENTRIES = 10_000
"""The most live credentials one process remembers at once (a few MB at most)."""


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
    The same cache serves sessions (its store is then a :class:`SessionStore`).
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
