"""How the benchmarks reach jobs: only through its public entry points.

- the schema: ``jobs_postgres.migrations.upgrade`` (what ``jobs migrate`` runs);
- enqueueing: ``JobService`` over ``PostgresJobStore`` on ``jobs_postgres.database.create_engine``
  (what the CLI and the API use);
- the worker: ``jobs_worker.main.run_worker`` (what ``jobs worker`` runs), with the benchmark's
  registry added to it; settings come from the environment as in production (``JOBS_*``);
- API tokens: ``jobs_tokens.issue_token`` over ``PostgresTokenStore`` (``jobs token create``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from jobs_core import JobService, Registry, SystemClock


def migrate(url: str) -> None:
    """Apply the Alembic chain to the database at ``url``."""
    from jobs_postgres.migrations import upgrade

    upgrade(url)


@contextmanager
def service(url: str, registry: Registry) -> Iterator[JobService]:
    """The job use cases over the PostgreSQL store at ``url``; the engine is disposed after."""
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    engine = create_engine(url)
    try:
        yield JobService(PostgresJobStore(engine), registry)
    finally:
        engine.dispose()


def run_worker(
    url: str, registry: Registry, concurrency: int, *, synchronous_commit: bool | None = None
) -> int:
    """Run ONE jobs worker on ``url`` with ``registry``'s types until SIGTERM; its exit code.

    Every other setting is the deployable's default (or the ``JOBS_*`` environment), exactly
    as ``jobs worker --concurrency N`` would run; ``synchronous_commit`` False is
    ``--no-synchronous-commit`` (the opt-in trade-off of decision 0006).
    """
    from jobs_worker import startup

    startup.begins()  # as `jobs worker` starts (decision 0047)
    from jobs_worker.main import run_worker as run

    from bench import tracing_sdk

    tracing_sdk.install_if_asked()  # JOBS_BENCH_TRACING_SDK=1: tracing's real cost measured
    os.environ["JOBS_DATABASE_URL"] = url
    if synchronous_commit is not None:
        os.environ["JOBS_SYNCHRONOUS_COMMIT"] = "1" if synchronous_commit else "0"
    return run(concurrency=concurrency, extra_registries=[registry])


def issue_token(url: str, org: str) -> str:
    """A new API token for ``org`` (the plain token)."""
    from jobs_postgres.database import create_engine
    from jobs_postgres.tokens import PostgresTokenStore
    from jobs_tokens import issue_token as issue

    engine = create_engine(url)
    try:
        token, _ = issue(PostgresTokenStore(engine), org, "bench", SystemClock().now())
        return token
    finally:
        engine.dispose()
