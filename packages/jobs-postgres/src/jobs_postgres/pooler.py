"""What a connection needs when it is lent by a pooler in transaction mode (decision 0040).

Behind PgBouncer's transaction pooling a connection holds no session of its own: the session
``timezone`` is the server's (or the role's), not the UTC the direct connections start with. The
loaders here read every ``timestamptz`` as a UTC ``datetime`` whatever that timezone, so the
values the store hands out are the same direct or pooled (the instant never changed: only the
``tzinfo`` the driver attached).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

import psycopg
from psycopg.abc import AdaptContext
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format

_TIMESTAMPTZ = "timestamptz"


@cache
def _in_utc(base: type[Loader]) -> type[Loader]:
    """A loader answering what ``base`` (the driver's loader, C or Python: the C ones cannot be
    subclassed, so it is wrapped) answers, in UTC."""

    class UtcLoader(Loader):
        def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
            super().__init__(oid, context)
            self._base = base(oid, context)

        def load(self, data: Buffer) -> datetime:
            value: datetime = self._base.load(data)
            return value.astimezone(UTC)

    UtcLoader.format = base.format
    UtcLoader.__name__ = UtcLoader.__qualname__ = f"Utc{base.__name__}"
    return UtcLoader


def register_utc_loaders(conn: psycopg.Connection[Any]) -> None:
    """Read ``timestamptz`` as UTC on ``conn`` (text and binary results)."""
    oid = conn.adapters.types[_TIMESTAMPTZ].oid
    for fmt in (Format.TEXT, Format.BINARY):
        base = conn.adapters.get_loader(oid, fmt)
        if base is not None and not base.__name__.startswith("Utc"):
            conn.adapters.register_loader(_TIMESTAMPTZ, _in_utc(base))
