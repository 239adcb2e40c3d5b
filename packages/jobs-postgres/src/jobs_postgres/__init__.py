"""The PostgreSQL adapter of jobs: the ``jobs`` table, its migration chain, the SKIP LOCKED store,
LISTEN/NOTIFY wake-ups and the API token table.

- :class:`~jobs_postgres.store.PostgresJobStore` — the :class:`jobs_core.ports.JobStore`
  (``from jobs_postgres import PostgresJobStore``);
- :class:`~jobs_postgres.wakeup.PostgresWakeup` — the :class:`jobs_core.ports.Wakeup` (also
  exported);
- :class:`~jobs_postgres.tokens.PostgresTokenStore` — the :class:`jobs_tokens.TokenStore`
  (API token hashes), and :class:`~jobs_postgres.sessions.PostgresSessionStore` — the
  :class:`jobs_tokens.SessionStore`;
- :mod:`jobs_postgres.migrations` — ``upgrade(url)``, ``downgrade(url)``, ``current(url)``;
- :mod:`jobs_postgres.database` — ``create_engine(url)``, ``resolve_database_url(url, data_dir)``;
- :func:`jobs_postgres.enqueue` / :func:`jobs_postgres.enqueue_many` /
  :func:`jobs_postgres.jobs_in` — enqueue inside a caller's SQLAlchemy ``Connection`` or
  ``Session`` (its transaction commits the job with the caller's rows: a module's transactional
  enqueue, :mod:`jobs_postgres.transactional`);
- :mod:`jobs_postgres.modules` — what the deployables do with module declarations
  (:mod:`jobs_core.modules`): migrate their chains, give them an engine.

Submodules are imported lazily by their users (the CLI keeps its start-up light), so this
package's ``__init__`` imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs_core.lazy import lazy_names

if TYPE_CHECKING:
    from jobs_postgres.store import PostgresJobStore
    from jobs_postgres.transactional import enqueue, enqueue_many, jobs_in
    from jobs_postgres.wakeup import PostgresWakeup

__all__ = ["PostgresJobStore", "PostgresWakeup", "enqueue", "enqueue_many", "jobs_in"]

_HOMES = {
    "PostgresJobStore": "jobs_postgres.store",
    "PostgresWakeup": "jobs_postgres.wakeup",
    "enqueue": "jobs_postgres.transactional",
    "enqueue_many": "jobs_postgres.transactional",
    "jobs_in": "jobs_postgres.transactional",
}


__getattr__ = lazy_names(__name__, _HOMES, globals())
