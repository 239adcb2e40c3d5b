"""What the deployables do with module declarations (:mod:`jobs_core.modules`) on PostgreSQL:
run their migration chains, and open the :class:`~jobs_core.modules.ModuleContext` their
builders receive (an engine of their own on the deployment's database).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from jobs_core import Clock, SystemClock
from jobs_core.modules import Module, ModuleContext, ModuleError

if TYPE_CHECKING:
    from jobs_postgres.migrations import Chain

# Alembic is imported only where a chain is read or run (``jobs migrate``): a worker or an API
# loading its modules never needs it, and importing it cost a worker 0.4 s of its start-up.

__all__ = [
    "chain_of",
    "migrate_modules",
    "module_revision",
    "module_settings",
    "opened_context",
]


def chain_of(module: Module) -> Chain | None:
    """The Alembic chain of ``module`` (None if it owns no tables)."""
    if module.migrations is None:
        return None
    from jobs_postgres.migrations import Chain

    try:
        package = importlib.import_module(module.migrations)
    except Exception as error:
        raise ModuleError(
            f"module {module.name!r}: its migrations {module.migrations!r} cannot be imported: "
            f"{error}"
        ) from error
    origin = getattr(package, "__file__", None)
    location = Path(origin).resolve().parent if origin else None
    if location is None or not (location / "env.py").is_file():
        raise ModuleError(
            f"module {module.name!r}: {module.migrations!r} is not a package holding an Alembic "
            "env.py and versions/"
        )
    return Chain(location, module.migration_version_table)


def migrate_modules(url: str, modules: Iterable[Module]) -> list[str]:
    """Upgrade each module's chain to its head, in the order given (run the jobs chain first);
    the names of the modules migrated."""
    from jobs_postgres.migrations import upgrade_chain

    migrated: list[str] = []
    for module in modules:
        chain = chain_of(module)
        if chain is None:
            continue
        upgrade_chain(url, chain)
        migrated.append(module.name)
    return migrated


def module_revision(url: str, module: Module) -> str | None:
    """The revision of ``module``'s chain applied on ``url`` (None: none, or no chain)."""
    from jobs_postgres.migrations import current_chain

    chain = chain_of(module)
    return None if chain is None else current_chain(url, chain)


def module_settings(environ: Mapping[str, str] | None = None, **resolved: object) -> dict[str, str]:
    """The settings a module reads: the ``JOBS_*`` variables of ``environ`` (the process's by
    default), overlaid with ``resolved`` (``max_upload_bytes=...`` → ``JOBS_MAX_UPLOAD_BYTES``;
    None values are left out, booleans are ``1``/``0``)."""
    source = os.environ if environ is None else environ
    settings = {name: value for name, value in source.items() if name.startswith("JOBS_")}
    for name, value in resolved.items():
        if value is None:
            continue
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        settings[f"JOBS_{name.upper()}"] = text
    return settings


@contextmanager
def opened_context(
    database_url: str | None,
    data_dir: Path,
    settings: Mapping[str, str] | None = None,
    *,
    clock: Clock | None = None,
) -> Iterator[ModuleContext]:
    """A :class:`ModuleContext` with an engine of its own on ``database_url`` (disposed on
    exit); without a URL, a context without a database."""
    engine = None
    if database_url is not None:
        from jobs_postgres.database import create_engine

        engine = create_engine(database_url)
    try:
        yield ModuleContext(
            engine=engine,
            database_url=database_url,
            data_dir=Path(data_dir),
            settings=dict(module_settings() if settings is None else settings),
            clock=clock or SystemClock(),
        )
    finally:
        if engine is not None:
            engine.dispose()
