"""Databases for the tests: a fresh one on the test server, migrated as ``jobs migrate`` does."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from jobs_linkcheck.module import module


def migrate(url: str) -> None:
    """The jobs chain, then the module's own (what ``jobs migrate`` does)."""
    from jobs_postgres import migrations
    from jobs_postgres.modules import migrate_modules

    migrations.upgrade(url)
    migrate_modules(url, [module])


@contextmanager
def scratch_database(server: str, prefix: str) -> Iterator[str]:
    """A new, empty database on ``server``, dropped at the end of the block."""
    from jobs_postgres.database import drop_database, ensure_database, with_database

    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(server, name)
    try:
        yield with_database(server, name)
    finally:
        drop_database(server, name)
