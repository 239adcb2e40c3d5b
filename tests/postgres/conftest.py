"""Fixtures of the PostgreSQL adapter tests (the database itself comes from the root conftest)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
from jobs_core import DedupScope, FakeClock, JobContext, JobType, Registry


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def registry() -> Registry:
    """Two no-op types, one per dedup scope."""
    registry = Registry("postgres-tests")

    def noop(ctx: JobContext) -> None:
        return None

    registry.register(JobType("reconcile", noop, dedup_scope=DedupScope.QUEUE))
    registry.register(JobType("crawl", noop, dedup_scope=DedupScope.ACTIVE))
    return registry


@pytest.fixture
def scratch_url(pg_server: str) -> Iterator[str]:
    """A new, empty (unmigrated) database on the session's server, dropped after the test."""
    from jobs_postgres.database import drop_database, ensure_database, with_database

    name = f"jobs_pg_scratch_{os.getpid()}_{secrets.token_hex(4)}"
    ensure_database(pg_server, name)
    try:
        yield with_database(pg_server, name)
    finally:
        drop_database(pg_server, name)
