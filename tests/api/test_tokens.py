"""Tokens: random, recognisable, stored only as a hash, revocable — on each token store."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import httpx
import pytest
from jobs_api.auth import (
    TOKEN_PREFIX,
    InMemoryTokenStore,
    TokenStore,
    hash_token,
    is_well_formed,
    issue_token,
    revoke_token,
)
from jobs_api.containers import Container
from jobs_core import FakeClock

from tests.api.conftest import bearer


@pytest.fixture
def tokens(container: Container) -> TokenStore:
    """The app's token store (in memory, or ``api_tokens`` in PostgreSQL)."""
    store: TokenStore = container.token_store()
    return store


def test_issued_tokens_are_random_prefixed_and_resolve_to_their_org(
    tokens: TokenStore, clock: FakeClock
) -> None:
    issued = []
    for i in range(20):
        issued.append(issue_token(tokens, "org-a", f"ci {i}", clock.now()))
        clock.advance(1)
    plain = [token for token, _ in issued]
    assert len(set(plain)) == 20
    for token, record in issued:
        assert re.fullmatch(r"jobs_[A-Za-z0-9_-]{43}", token)
        assert is_well_formed(token)
        assert record.org_id == "org-a"
        assert record.revoked_at is None
        assert tokens.org_for(hash_token(token)) == "org-a"
    assert [r.label for r in tokens.list("org-a")] == [f"ci {i}" for i in range(20)]
    assert tokens.list("org-b") == []


def _stored_values(tokens: TokenStore, container: Container) -> list[str]:
    """Everything the token store holds, as text: the raw ``api_tokens`` rows on PostgreSQL,
    every field of every record in memory."""
    if isinstance(tokens, InMemoryTokenStore):
        return [str(value) for record in tokens.records for value in dataclasses.astuple(record)]
    from sqlalchemy import text

    with container.engine().connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT t::text FROM api_tokens AS t"))]


def test_a_token_is_never_stored_in_clear(
    tokens: TokenStore, container: Container, clock: FakeClock
) -> None:
    token, record = issue_token(tokens, "org-a", "deploy", clock.now())
    assert record.token_hash == hashlib.sha256(token.encode()).hexdigest()
    stored = _stored_values(tokens, container)
    assert any(record.token_hash in value for value in stored)
    secret = token.removeprefix(TOKEN_PREFIX)
    assert not any(secret in value for value in stored)


def test_revoke_by_token_or_by_id(tokens: TokenStore, clock: FakeClock) -> None:
    by_token, _ = issue_token(tokens, "org-a", "one", clock.now())
    by_id, record = issue_token(tokens, "org-a", "two", clock.now())
    kept, _ = issue_token(tokens, "org-a", "three", clock.now())

    assert revoke_token(tokens, by_token)
    assert revoke_token(tokens, str(record.id))
    assert tokens.org_for(hash_token(by_token)) is None
    assert tokens.org_for(hash_token(by_id)) is None
    assert tokens.org_for(hash_token(kept)) == "org-a"
    assert not revoke_token(tokens, by_token), "a revoked token is not revoked twice"
    assert not revoke_token(tokens, TOKEN_PREFIX + "A" * 43)
    assert not revoke_token(tokens, "01900000-0000-7000-8000-000000000000")
    revoked = [r for r in tokens.list("org-a") if r.revoked_at is not None]
    assert {r.label for r in revoked} == {"one", "two"}


def test_bad_input_is_refused_clearly(tokens: TokenStore, clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="org_id must not be empty"):
        issue_token(tokens, "  ", "x", clock.now())
    with pytest.raises(ValueError, match="neither a token"):
        revoke_token(tokens, "not-a-token")


@pytest.mark.anyio
async def test_a_revoked_token_stops_working_at_once(
    client: httpx.AsyncClient, tokens: TokenStore, clock: FakeClock
) -> None:
    token, _ = issue_token(tokens, "org-a", "soon revoked", clock.now())
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 200
    revoke_token(tokens, token)
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 401
