"""The Alembic migration chain of the Imports module, shipped inside the package.

It is a chain of its own, with its own version table (``alembic_version_imports``), run after
the jobs chain through :func:`jobs_postgres.migrations.upgrade_chain` (decision 0004): the two
evolve independently, and the jobs schema never learns that this module exists. Its tables hold
no foreign key to ``jobs``, so the order is a convention (jobs first, then the modules) rather
than a constraint.
"""

from __future__ import annotations

from pathlib import Path

from jobs_postgres.migrations import Chain, current_chain, downgrade_chain, upgrade_chain

__all__ = ["CHAIN", "current", "downgrade", "upgrade"]

CHAIN = Chain(Path(__file__).resolve().parent, "alembic_version_imports")
"""The chain that creates ``site_targets``, ``pages``, ``imports`` and ``import_rows``."""


def upgrade(url: str, revision: str = "head") -> None:
    """Create or upgrade the Imports tables on the database at ``url`` (idempotent)."""
    upgrade_chain(url, CHAIN, revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Undo the Imports tables down to ``revision`` (``base``: drop them all)."""
    downgrade_chain(url, CHAIN, revision)


def current(url: str) -> str | None:
    """The Imports chain's revision applied to the database at ``url``, None if none is."""
    return current_chain(url, CHAIN)
