"""The Alembic migration chain of jobs-postgres, shipped inside the package.

The chain (``env.py`` + ``versions/`` beside this file) is found from this package's directory,
so it runs from an installed wheel and from any working directory. It records its revision in
its own version table, :data:`JOBS_CHAIN` ``.version_table``: a module that owns tables (e.g.
``jobs_imports``) ships its own chain with its own version table and runs it with
:func:`upgrade_chain` after this one (decision 0004).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command, context
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from jobs_postgres.database import create_unpooled_engine
from jobs_postgres.errors import unavailable_as_store_error
from jobs_postgres.schema import metadata


@dataclass(frozen=True, slots=True)
class Chain:
    """One Alembic migration chain: its script directory and the table of its revision.

    ``script_location`` holds an ``env.py`` (a module may reuse this package's: see
    :func:`upgrade_chain`) and a ``versions/`` directory.
    """

    script_location: Path
    version_table: str


JOBS_CHAIN = Chain(Path(__file__).resolve().parent, "alembic_version_jobs")
"""The chain that creates ``jobs``, ``api_tokens`` and, on PostgreSQL < 18, ``uuidv7()``."""

MIGRATION_LOCK = 0x6A6F6273  # "jobs": one advisory lock serialises concurrent migrators


def _config(url: str, chain: Chain) -> Config:
    config = Config()
    config.set_main_option("script_location", str(chain.script_location))
    # Passed as attributes, not ini options: a URL may hold '%' that ConfigParser would read
    # as an interpolation.
    config.attributes["url"] = url
    config.attributes["version_table"] = chain.version_table
    return config


def upgrade_chain(url: str, chain: Chain, revision: str = "head") -> None:
    """Upgrade the database at ``url`` along ``chain`` to ``revision``.

    A module's ``env.py`` may be the two lines ``from jobs_postgres.migrations import
    run_online`` and ``run_online()``: it reads the URL and the version table from the config.
    """
    with unavailable_as_store_error():
        command.upgrade(_config(url, chain), revision)


def downgrade_chain(url: str, chain: Chain, revision: str = "base") -> None:
    """Downgrade the database at ``url`` along ``chain`` to ``revision``."""
    with unavailable_as_store_error():
        command.downgrade(_config(url, chain), revision)


def current_chain(url: str, chain: Chain) -> str | None:
    """The revision of ``chain`` applied to the database at ``url``, None if none is."""
    engine = create_unpooled_engine(url)
    try:
        with unavailable_as_store_error(), engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table": chain.version_table})
            revision: str | None = context.get_current_revision()
            return revision
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    """Create or upgrade the jobs schema on the database at ``url`` (idempotent)."""
    upgrade_chain(url, JOBS_CHAIN, revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Undo the jobs schema down to ``revision`` (``base``: drop everything it created)."""
    downgrade_chain(url, JOBS_CHAIN, revision)


def current(url: str) -> str | None:
    """The jobs schema revision of the database at ``url``, None on an empty database."""
    return current_chain(url, JOBS_CHAIN)


def head() -> str:
    """The latest revision of the jobs chain."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_config("", JOBS_CHAIN))
    latest = script.get_current_head()
    if latest is None:  # pragma: no cover - the package ships its revisions
        raise RuntimeError("the jobs migration chain has no revision")
    return latest


def run_online() -> None:
    """The body of an ``env.py``: run the current Alembic command's migrations, online, in one
    transaction, on the URL and version table the command was given.

    An advisory lock held for that transaction serialises concurrent migrators (an API and a
    worker starting together): the second waits, then finds nothing left to do.
    """
    if context.is_offline_mode():
        raise RuntimeError("the jobs migrations run online only (jobs migrate)")
    config = context.config
    engine = create_unpooled_engine(config.attributes["url"])
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=config.attributes.get("metadata", metadata),
                version_table=config.attributes["version_table"],
                transaction_per_migration=False,
            )
            with context.begin_transaction():
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                )
                context.run_migrations()
    finally:
        engine.dispose()
