"""The PostgreSQL adapter of jobs: the ``jobs`` table, its migration chain, the SKIP LOCKED store,
LISTEN/NOTIFY wake-ups and the API token table.

- :class:`~jobs_postgres.store.PostgresJobStore` — the :class:`jobs_core.ports.JobStore`;
- :class:`~jobs_postgres.wakeup.PostgresWakeup` — the :class:`jobs_core.ports.Wakeup`;
- :class:`~jobs_postgres.tokens.PostgresTokenStore` — the :class:`jobs_core.tokens.TokenStore`
  (API token hashes), and :class:`~jobs_postgres.sessions.PostgresSessionStore` — the
  :class:`jobs_core.tokens.SessionStore`;
- :mod:`jobs_postgres.migrations` — ``upgrade(url)``, ``downgrade(url)``, ``current(url)``;
- :mod:`jobs_postgres.database` — ``create_engine(url)``, ``resolve_database_url(url, data_dir)``.

Submodules are imported lazily by their users (the CLI keeps its start-up light), so this
package's ``__init__`` imports nothing heavy.
"""
