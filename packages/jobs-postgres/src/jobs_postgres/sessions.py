"""Browser sessions in the ``api_sessions`` table (docs/sessions.md).

Only ``sha256(cookie)`` is stored, with the token the session was opened with: a session is live
while it is not ended, not expired and its token is not revoked, so revoking a token ends its
sessions. It implements the session port ``jobs_tokens.SessionStore``.
"""

from __future__ import annotations

from datetime import datetime

from jobs_core import Clock
from sqlalchemy import Engine, and_, insert, literal, select, update

from jobs_postgres.errors import unavailable_as_store_error
from jobs_postgres.schema import api_sessions, api_tokens


class PostgresSessionStore:
    """Sessions of API tokens, in PostgreSQL."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    def open(
        self, token_hash: str, session_hash: str, now: datetime, expires_at: datetime
    ) -> str | None:
        """Open a session for a live token, in one statement; its org, or None."""
        live = select(
            api_tokens.c.id,
            api_tokens.c.org_id,
            literal(session_hash),
            literal(now),
            literal(expires_at),
        ).where(api_tokens.c.token_hash == token_hash, api_tokens.c.revoked_at.is_(None))
        statement = (
            insert(api_sessions)
            .from_select(["token_id", "org_id", "session_hash", "created_at", "expires_at"], live)
            .returning(api_sessions.c.org_id)
        )
        with unavailable_as_store_error(), self._engine.begin() as conn:
            org: str | None = conn.execute(statement).scalar_one_or_none()
            return org

    def org_for(self, session_hash: str) -> str | None:
        """The org of a live session of a live token.

        Index: api_sessions_session_hash_key, then api_tokens' primary key.
        """
        statement = (
            select(api_sessions.c.org_id)
            .join(api_tokens, api_tokens.c.id == api_sessions.c.token_id)
            .where(
                api_sessions.c.session_hash == session_hash,
                api_sessions.c.ended_at.is_(None),
                api_sessions.c.expires_at > self._clock.now(),
                api_tokens.c.revoked_at.is_(None),
            )
        )
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            org: str | None = conn.execute(statement).scalar_one_or_none()
            return org

    def end(self, session_hash: str, now: datetime) -> bool:
        """End a session; False if it was not live."""
        statement = (
            update(api_sessions)
            .where(
                and_(
                    api_sessions.c.session_hash == session_hash,
                    api_sessions.c.ended_at.is_(None),
                )
            )
            .values(ended_at=now)
        )
        with unavailable_as_store_error(), self._engine.begin() as conn:
            return bool(conn.execute(statement).rowcount == 1)

    def expires_at(self, session_hash: str) -> datetime | None:
        """When a stored session expires."""
        statement = select(api_sessions.c.expires_at).where(
            api_sessions.c.session_hash == session_hash
        )
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            expires: datetime | None = conn.execute(statement).scalar_one_or_none()
            return expires
