"""The database behind every command: JOBS_DATABASE_URL, or the embedded server.

Heavy imports (SQLAlchemy, psycopg, pgserver) happen inside these functions, when a command that
needs the database runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from jobs_cli.errors import DatabaseUnavailable, first_line
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from jobs_core import JobService, Registry
    from sqlalchemy import Engine


def database_url(settings: CliSettings) -> str:
    """The URL to connect to: JOBS_DATABASE_URL, else the embedded server (started if needed).

    The embedded server keeps its data in ``settings.data_dir`` across runs.
    """
    from jobs_postgres.database import resolve_database_url

    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return resolve_database_url(settings.database_url, settings.data_dir)
    except (OSError, RuntimeError) as exc:
        # pgserver raises these when the embedded server cannot start (bad data directory,
        # another version's data, pg_ctl failing); the log it names says why.
        raise DatabaseUnavailable(
            f"cannot start the embedded PostgreSQL in {settings.data_dir}: "
            f"{first_line(str(exc)) or type(exc).__name__}"
        ) from exc


@contextmanager
def engine(settings: CliSettings) -> Iterator[Engine]:
    """A SQLAlchemy engine on the database, disposed at the end."""
    from jobs_postgres.database import create_engine

    eng = create_engine(database_url(settings))
    try:
        yield eng
    finally:
        eng.dispose()


@contextmanager
def service(settings: CliSettings, registry: Registry | None = None) -> Iterator[JobService]:
    """The job use cases over the PostgreSQL store and the enabled job types."""
    from jobs_core import JobService
    from jobs_postgres.store import PostgresJobStore

    from jobs_cli.registries import build_registry

    with engine(settings) as eng:
        yield JobService(PostgresJobStore(eng), registry or build_registry(settings.demo_types))
