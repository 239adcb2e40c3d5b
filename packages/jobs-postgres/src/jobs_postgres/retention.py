"""Retention on PostgreSQL: the purge's batched deletes and the run-time settings row.

Each batch is one short autocommit transaction that deletes at most ``limit`` rows of one type
found through ``jobs_finished_idx`` (``(type, finished_at, id)`` over the finished rows only),
starting after the last key of the previous batch: a batch never rescans what earlier ones
removed, and never walks the whole history (``EXPLAIN`` in tests/retention shows the index range
scan). No batch holds a lock or a snapshot longer than itself, so vacuum keeps up between them.
"""

from __future__ import annotations

import json
from typing import Any

from jobs_core.retention import Key, RetentionSettings
from sqlalchemy import Engine, text

from jobs_postgres.errors import unavailable_as_store_error

RETENTION_KEY = "retention"

# jobs_finished_idx, backwards from the newest finished row of the type: OFFSET n-1 rows.
NTH_NEWEST = text(
    """SELECT finished_at, id FROM jobs
    WHERE type = :type AND status = ANY(:statuses)
      AND status IN ('done', 'failed', 'cancelled') AND finished_at IS NOT NULL
    ORDER BY finished_at DESC, id DESC
    OFFSET :offset LIMIT 1"""
)

# jobs_finished_idx: an index range scan from (type, after) up to (type, before), stopped by the
# LIMIT; the rows are locked (SKIP LOCKED: one a user is deleting or retrying right now is left
# for the next purge) and deleted in the same statement.
_DELETE_BATCH = """WITH doomed AS (
    SELECT id FROM jobs
    WHERE type = :type AND status = ANY(:statuses)
      AND status IN ('done', 'failed', 'cancelled')
      AND (finished_at, id) < (:before_at, :before_id)
      {after}
    ORDER BY finished_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
DELETE FROM jobs AS j USING doomed WHERE j.id = doomed.id
RETURNING j.finished_at, j.id"""
DELETE_BATCH_FIRST = text(_DELETE_BATCH.format(after=""))
DELETE_BATCH_AFTER = text(
    _DELETE_BATCH.format(after="AND (finished_at, id) > (:after_at, :after_id)")
)

READ_SETTING = text("SELECT value FROM jobs_settings WHERE key = :key")
WRITE_SETTING = text(
    """INSERT INTO jobs_settings (key, value, updated_at, updated_by)
    VALUES (:key, CAST(:value AS jsonb), now(), :by)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
        updated_by = excluded.updated_by"""
)


class PostgresRetentionStore:
    """:class:`jobs_core.retention.RetentionStore` on the ``jobs`` table."""

    def __init__(self, engine: Engine) -> None:
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    def nth_newest(self, job_type: str, statuses: tuple[str, ...], n: int) -> Key | None:
        """The ``(finished_at, id)`` of the ``n``-th newest finished job of the type."""
        if n < 1:
            raise ValueError("n must be at least 1")
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            row = conn.execute(
                NTH_NEWEST, {"type": job_type, "statuses": list(statuses), "offset": n - 1}
            ).one_or_none()
        return None if row is None else (row.finished_at, row.id)

    def delete_batch(
        self,
        job_type: str,
        statuses: tuple[str, ...],
        before: Key,
        after: Key | None,
        limit: int,
    ) -> tuple[int, Key | None]:
        """Delete one batch in its own transaction; the count and the last key deleted."""
        params: dict[str, Any] = {
            "type": job_type,
            "statuses": list(statuses),
            "before_at": before[0],
            "before_id": before[1],
            "limit": limit,
        }
        statement = DELETE_BATCH_FIRST
        if after is not None:
            params.update(after_at=after[0], after_id=after[1])
            statement = DELETE_BATCH_AFTER
        with unavailable_as_store_error(), self._autocommit.connect() as conn:
            rows = conn.execute(statement, params).all()
        if not rows:
            return 0, None
        last = max((row.finished_at, row.id) for row in rows)
        return len(rows), last


class PostgresSettingsStore:
    """The run-time retention settings, one JSON row of ``jobs_settings``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def load(self) -> RetentionSettings:
        """The stored settings, or the defaults when none were ever saved."""
        with unavailable_as_store_error(), self._engine.connect() as conn:
            value = conn.execute(READ_SETTING, {"key": RETENTION_KEY}).scalar_one_or_none()
        return RetentionSettings() if value is None else RetentionSettings.from_dict(value)

    def save(self, settings: RetentionSettings, by: str) -> None:
        """Store ``settings`` (``by``: who changed them, for the record)."""
        with unavailable_as_store_error(), self._engine.begin() as conn:
            conn.execute(
                WRITE_SETTING,
                {"key": RETENTION_KEY, "value": json.dumps(settings.to_dict()), "by": by},
            )


def explain_batch(engine: Engine, job_type: str, before: Key, limit: int = 1000) -> str:
    """The plan of one purge batch (without running it): what tests and ``jobs doctor``
    show to prove the batch walks ``jobs_finished_idx``."""
    select = (
        _DELETE_BATCH.split("FOR UPDATE", maxsplit=1)[0]
        .split("WITH doomed AS (")[1]
        .format(after="")
    )
    with unavailable_as_store_error(), engine.connect() as conn:
        rows = conn.execute(
            text("EXPLAIN " + select),
            {
                "type": job_type,
                "statuses": ["done"],
                "before_at": before[0],
                "before_id": before[1],
                "limit": limit,
            },
        ).all()
    return "\n".join(str(row[0]) for row in rows)
