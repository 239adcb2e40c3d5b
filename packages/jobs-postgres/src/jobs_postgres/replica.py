"""Positions in the write-ahead log of a primary and its streaming standby, for read-your-writes
(``jobs_api.reads``; decision 0040).

A position is the LSN as an integer (``lsn - '0/0'``): comparable, and an LSN the primary gives
after a commit returned is at or past that commit's record, so a standby whose replay position
reached it shows the commit.
"""

from __future__ import annotations

from sqlalchemy import Engine, text

from jobs_postgres.errors import unavailable_as_store_error

_WRITTEN = text("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
# A server that is not in recovery (a read URL naming the primary itself) has "replayed" all.
_REPLAYED = text(
    "SELECT (CASE WHEN pg_is_in_recovery() THEN coalesce(pg_last_wal_replay_lsn(), '0/0')"
    " ELSE pg_current_wal_insert_lsn() END - '0/0'::pg_lsn)::bigint"
)


class PostgresWalPositions:
    """``written()`` on the primary, ``replayed()`` on the standby: one query each."""

    def __init__(self, primary: Engine, standby: Engine) -> None:
        self._primary = primary.execution_options(isolation_level="AUTOCOMMIT")
        self._standby = standby.execution_options(isolation_level="AUTOCOMMIT")

    def written(self) -> int:
        """The primary's WAL insert position now."""
        with unavailable_as_store_error(), self._primary.connect() as conn:
            return int(conn.execute(_WRITTEN).scalar_one())

    def replayed(self) -> int:
        """The standby's replay position (a server not in recovery: its own insert position)."""
        with unavailable_as_store_error(), self._standby.connect() as conn:
            return int(conn.execute(_REPLAYED).scalar_one())
