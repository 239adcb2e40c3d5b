"""API token hashes in the ``api_tokens`` table: the PostgreSQL adapter of the token port
``jobs_tokens.TokenStore`` (whose in-memory twin is ``jobs_tokens.InMemoryTokenStore``).

A token is hashed before it gets here: the table only ever holds ``token_hash``, so whoever
reads it cannot authenticate.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from jobs_tokens import TokenRecord
from sqlalchemy import Engine, Select, exc, insert, select, update

from jobs_postgres.errors import unavailable_as_store_error, unique_violation
from jobs_postgres.schema import api_tokens

_RECORD = (
    api_tokens.c.id,
    api_tokens.c.org_id,
    api_tokens.c.token_hash,
    api_tokens.c.label,
    api_tokens.c.created_at,
    api_tokens.c.revoked_at,
)


def _record(row: Any) -> TokenRecord:
    return TokenRecord(*row)


class PostgresTokenStore:
    """Token hashes with their org, label and revocation, in PostgreSQL."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # A read of one row needs no transaction: in autocommit it is one round trip, where a
        # transactional connection adds a BEGIN before it and a ROLLBACK when it is returned.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    def create(self, org_id: str, token_hash: str, label: str | None, now: datetime) -> TokenRecord:
        """Store a new token hash for the org; ``ValueError`` if that hash is already stored."""
        statement = (
            insert(api_tokens)
            .values(org_id=org_id, token_hash=token_hash, label=label, created_at=now)
            .returning(*_RECORD)
        )
        try:
            with unavailable_as_store_error(), self._engine.begin() as conn:
                return _record(conn.execute(statement).one())
        except exc.IntegrityError as error:
            if unique_violation(error):
                raise ValueError("this token hash is already stored") from None
            raise

    def org_for(self, token_hash: str) -> str | None:
        """The org of a live token; None if the hash is unknown or revoked.

        Index: api_tokens_token_hash_key (one probe per authenticated request the API has not
        cached). One statement in autocommit: a single round trip. A read may run twice, so a
        pooled connection found lost (dropped by the server without a word the checkout check
        could see) is retried once on a fresh one, as ``PostgresJobStore`` does its reads.
        """
        statement = select(api_tokens.c.org_id).where(
            api_tokens.c.token_hash == token_hash, api_tokens.c.revoked_at.is_(None)
        )
        with unavailable_as_store_error():
            try:
                return self._org(statement)
            except exc.DBAPIError as error:
                if not error.connection_invalidated:
                    raise
            return self._org(statement)

    def _org(self, statement: Select[Any]) -> str | None:
        with self._autocommit.connect() as conn:
            org: str | None = conn.execute(statement).scalar_one_or_none()
            return org

    def revoke(self, token_id: uuid.UUID, now: datetime | None = None) -> bool:
        """Revoke a token by id; False if there is no live token with that id."""
        return self._revoke(api_tokens.c.id == token_id, now)

    def revoke_hash(self, token_hash: str, now: datetime | None = None) -> bool:
        """Revoke a token by its hash; False if there is no live token with that hash."""
        return self._revoke(api_tokens.c.token_hash == token_hash, now)

    def _revoke(self, match: Any, now: datetime | None) -> bool:
        statement = (
            update(api_tokens)
            .where(match, api_tokens.c.revoked_at.is_(None))
            .values(revoked_at=now or datetime.now(UTC))
        )
        with unavailable_as_store_error(), self._engine.begin() as conn:
            return bool(conn.execute(statement).rowcount == 1)

    def list(self, org_id: str) -> list[TokenRecord]:
        """The org's tokens, oldest first, revoked ones included.

        Index: api_tokens_org_idx.
        """
        statement = (
            select(*_RECORD)
            .where(api_tokens.c.org_id == org_id)
            .order_by(api_tokens.c.created_at, api_tokens.c.id)
        )
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            return [_record(row) for row in conn.execute(statement)]
