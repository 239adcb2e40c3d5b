"""Tokens: random, recognisable, stored only as a hash, revocable — on each token store; the
credential component (``jobs_tokens``) used by the API and the CLI without an import cycle."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from jobs_api.containers import Container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock
from jobs_tokens import (
    TOKEN_PREFIX,
    InMemoryTokenStore,
    TokenCache,
    TokenStore,
    hash_token,
    is_well_formed,
    issue_token,
    new_token,
    revoke_token,
)

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
async def test_a_revoked_token_is_refused_once_the_token_cache_time_has_passed(
    client: httpx.AsyncClient, container: Container, tokens: TokenStore, clock: FakeClock
) -> None:
    # The revocation goes to the store, as `jobs token revoke` does from another process: the
    # API learns it when its cached answer expires, JOBS_API_TOKEN_CACHE_S after the lookup.
    ttl_s = container.config.api_token_cache_s()
    assert ttl_s == ApiSettings().api_token_cache_s > 0
    token, _ = issue_token(tokens, "org-a", "soon revoked", clock.now())
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 200
    revoke_token(tokens, token)
    clock.advance(ttl_s - 0.001)
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 200
    clock.advance(0.001)
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 401
    clock.advance(3600)
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 401


@pytest.mark.anyio
async def test_with_a_token_cache_time_of_0_a_revocation_takes_effect_at_once(
    client: httpx.AsyncClient, container: Container, tokens: TokenStore, clock: FakeClock
) -> None:
    container.config.api_token_cache_s.from_value(0)
    token, _ = issue_token(tokens, "org-a", "soon revoked", clock.now())
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 200
    revoke_token(tokens, token)
    assert (await client.get("/jobs", headers=bearer(token))).status_code == 401
    assert len(container.token_cache()) == 0


@pytest.mark.anyio
async def test_an_unknown_token_is_never_cached(
    client: httpx.AsyncClient, container: Container, tokens: TokenStore, clock: FakeClock
) -> None:
    cache: TokenCache = container.token_cache()
    made_up = [new_token() for _ in range(50)]
    for token in made_up:
        assert (await client.get("/jobs", headers=bearer(token))).status_code == 401
    assert len(cache) == 0, "a refused token takes no room"
    # Stored after it was refused: a refusal is never remembered either.
    tokens.create("org-a", hash_token(made_up[0]), "late", clock.now())
    assert (await client.get("/jobs", headers=bearer(made_up[0]))).status_code == 200
    assert len(cache) == 1


class SlowStore(InMemoryTokenStore):
    """A token store whose lookups take ``seconds`` of the fake clock (a slow database)."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__(clock)
        self.fake_clock, self.seconds = clock, seconds
        self.lookups = 0

    def org_for(self, token_hash: str) -> str | None:
        """The store's answer, given ``seconds`` later."""
        self.lookups += 1
        org = super().org_for(token_hash)
        self.fake_clock.advance(self.seconds)
        return org


def test_a_cached_answer_lives_ttl_from_before_its_lookup(clock: FakeClock) -> None:
    tokens = SlowStore(clock, seconds=3)
    cache = TokenCache(tokens, clock, ttl_s=5)
    token, _ = issue_token(tokens, "org-a", None, clock.now())
    started = clock.now()
    assert cache.org_for(hash_token(token)) == "org-a"  # the lookup ends at +3 s
    revoke_token(tokens, token)
    clock.set(started + timedelta(seconds=4.999))
    assert cache.org_for(hash_token(token)) == "org-a"
    assert tokens.lookups == 1
    clock.set(started + timedelta(seconds=5))
    assert cache.org_for(hash_token(token)) is None
    assert tokens.lookups == 2


def test_a_clock_that_steps_back_does_not_extend_a_cached_answer(clock: FakeClock) -> None:
    tokens = InMemoryTokenStore(clock)
    cache = TokenCache(tokens, clock, ttl_s=5)
    token, _ = issue_token(tokens, "org-a", None, clock.now())
    assert cache.org_for(hash_token(token)) == "org-a"
    revoke_token(tokens, token)
    clock.advance(-1)
    assert cache.org_for(hash_token(token)) is None


def test_the_cache_holds_at_most_max_entries_and_still_answers_right(clock: FakeClock) -> None:
    tokens = InMemoryTokenStore(clock)
    cache = TokenCache(tokens, clock, ttl_s=5, max_entries=3)
    issued = [issue_token(tokens, f"org-{i}", None, clock.now())[0] for i in range(10)]
    for _ in range(2):
        for i, token in enumerate(issued):
            assert cache.org_for(hash_token(token)) == f"org-{i}"
            assert len(cache) <= 3
    clock.advance(5)
    assert cache.org_for(hash_token(issued[0])) == "org-0"
    assert len(cache) == 1, "expired entries are dropped when a new one is made"
    with pytest.raises(ValueError, match="ttl_s"):
        TokenCache(tokens, clock, ttl_s=-1)


def _imported_modules(path: Path, prefix: str) -> set[str]:
    """Every ``prefix*`` module a source file imports, at any depth (``TYPE_CHECKING`` blocks and
    imports inside functions included: each still ties the two modules together)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith(prefix)}
    return found


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def test_the_credential_modules_of_the_api_sit_in_no_import_cycle(tmp_path: Path) -> None:
    import jobs_api

    package = Path(jobs_api.__file__).parent
    graph = {
        f"jobs_api.{path.stem}": _imported_modules(path, "jobs_api.")
        for path in package.glob("*.py")
    }
    for module in ("jobs_api.auth", "jobs_api.sessions"):
        assert module not in _reachable(graph, module), f"{module} is in an import cycle"
        assert "jobs_api.containers" not in _reachable(graph, module)
    assert graph["jobs_api.containers"].isdisjoint({"jobs_api.auth", "jobs_api.sessions"})
    # the check sees a cycle closed by a TYPE_CHECKING import, as auth/containers was
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nimport jobs_api.b\n")
    (tmp_path / "b.py").write_text("if TYPE_CHECKING:\n    from jobs_api.a import A\n")
    made_up = {f"jobs_api.{p.stem}": _imported_modules(p, "jobs_api.") for p in tmp_path.iterdir()}
    assert "jobs_api.a" in _reachable(made_up, "jobs_api.a")


def test_the_cli_issues_tokens_through_jobs_tokens_not_the_api() -> None:
    import jobs_cli

    sources = sorted(Path(jobs_cli.__file__).parent.rglob("*.py"))
    uses = {
        module: [path.name for path in sources if module in _imported_modules(path, module)]
        for module in ("jobs_tokens", "jobs_api.auth", "jobs_api.sessions")
    }
    assert uses == {
        "jobs_tokens": ["admin.py"],
        "jobs_api.auth": [],
        "jobs_api.sessions": [],
    }
