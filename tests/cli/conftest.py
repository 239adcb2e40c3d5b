"""Fixtures of the CLI tests: the environment that points ``jobs`` at the session's database."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import InProcess, clean_env
from tests.dropping import drop_later


@pytest.fixture
def cli_env(pg_url: str, tmp_path: Path) -> dict[str, str]:
    """``jobs`` on the test database, demo types on, no embedded server (a data directory of
    the test's own, in case a command wrongly ignored the URL)."""
    return clean_env(
        JOBS_DATABASE_URL=pg_url,
        JOBS_DATA_DIR=str(tmp_path / "data"),
        JOBS_DEMO_TYPES="1",
    )


@pytest.fixture
def fresh_db_url(pg_url: str) -> Iterator[str]:
    """An empty, unmigrated database on the test server, dropped afterwards."""
    from jobs_postgres.database import ensure_database, with_database

    admin = with_database(pg_url, "postgres")
    name = f"jobs_cli_{secrets.token_hex(4)}"
    ensure_database(admin, name)
    try:
        yield with_database(pg_url, name)
    finally:
        drop_later(admin, name)  # off the test's clock (tests/dropping.py)


@pytest.fixture
def jobs_here(
    cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> InProcess:
    """``jobs`` in this process with the environment of :func:`cli_env`."""
    for name in [k for k in os.environ if k.startswith("JOBS_")]:
        monkeypatch.delenv(name)
    for name, value in cli_env.items():
        if name.startswith("JOBS_"):
            monkeypatch.setenv(name, value)
    return InProcess(capsys)
