"""The composition root of the worker: one dependency-injector container.

``config`` comes from :class:`~jobs_worker.settings.WorkerSettings`; ``registry`` is an input
(:func:`jobs_worker.registries.worker_registry` composes it). The PostgreSQL engine is a
``Resource`` disposed by ``shutdown_resources()``. Tests override providers
(``container.store.override(providers.Object(InMemoryJobStore()))``), never modules.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dependency_injector import containers, providers
from jobs_core import JobService, JobStore, Registry, SystemClock, Wakeup

from jobs_worker.settings import WorkerSettings
from jobs_worker.worker import Worker, WorkerConfig

if TYPE_CHECKING:
    from sqlalchemy import Engine


def _database_url(url: str | None, data_dir: Path | str) -> str:
    from jobs_postgres.database import resolve_database_url

    return resolve_database_url(url, Path(data_dir))


def _engine(
    url: str, synchronous_commit: bool, store_timeout_s: float, for_store: bool = False
) -> Iterator[Engine]:
    from jobs_postgres.database import (
        STORE_SESSION_SETTINGS,
        WORKER_SESSION_SETTINGS,
        create_engine,
    )
    from jobs_postgres.deadlines import abort_stuck_calls, bounded_session_settings

    # No pre-ping: it costs a round trip before every claim and every completion batch, and
    # the worker needs no such guard: a call on a connection the server dropped fails as
    # StoreUnavailable, SQLAlchemy then replaces the pool's connections, and the worker's
    # backoff retries the call (the write is fenced by the lease, so a retry is safe).
    # The worker's sessions plan the claim as an ordered walk of the queue index even on a
    # table the planner has not analyzed yet (jobs_postgres.database.WORKER_SESSION_SETTINGS);
    # the store's sessions plan each statement once (STORE_SESSION_SETTINGS: generic plans).
    # Without synchronous commit (JOBS_SYNCHRONOUS_COMMIT=0; on by default) a commit does not
    # wait for its WAL flush: a crash of the PostgreSQL server (never of the worker) may then
    # forget the last claims and outcomes, and a job may run twice; see WorkerSettings.
    # Every wait is bounded by store_timeout_s (the lease fence's argument, docs/worker.md):
    # statement and lock timeouts, keepalives and a TCP user timeout, and a watchdog that
    # aborts a call whose link went silent (jobs_postgres.deadlines).
    planner = STORE_SESSION_SETTINGS if for_store else WORKER_SESSION_SETTINGS
    settings = {**planner, **bounded_session_settings(store_timeout_s * 0.8)}
    if not synchronous_commit:
        settings["synchronous_commit"] = "off"
    engine = create_engine(
        url,
        pool_pre_ping=False,
        session_settings=settings,
        pool_timeout=max(1.0, store_timeout_s),
        connect_args=_connect_args(store_timeout_s, settings),
    )
    abort_stuck_calls(engine, store_timeout_s)
    try:
        yield engine
    finally:
        engine.dispose()


def _connect_args(store_timeout_s: float, session: Mapping[str, str]) -> dict[str, Any]:
    from jobs_postgres.deadlines import bounded_connect_args

    startup = {"timezone": "UTC", **session}
    return {
        "options": " ".join(f"-c {name}={value}" for name, value in startup.items()),
        # libpq counts whole seconds, at least 2
        "connect_timeout": max(2, math.ceil(store_timeout_s)),
        **bounded_connect_args(store_timeout_s),
    }


def _postgres_store(engine: Engine) -> JobStore:
    from jobs_postgres.store import PostgresJobStore

    return PostgresJobStore(engine)


def _postgres_wakeup(url: str) -> Wakeup:
    from jobs_postgres.wakeup import PostgresWakeup

    return PostgresWakeup(url)


def worker_config(values: Mapping[str, Any]) -> WorkerConfig:
    """The :class:`WorkerConfig` of validated settings (as ``config`` holds them)."""
    settings = WorkerSettings.model_validate(dict(values))
    return WorkerConfig(
        concurrency=settings.concurrency,
        heartbeat_s=settings.effective_heartbeat_s,
        sweep_interval_s=settings.sweep_interval_s,
        sweep_threshold_s=settings.sweep_threshold_s,
        poll_interval_s=settings.poll_interval_s,
        cancel_check_s=settings.cancel_check_s,
        shutdown_grace_s=settings.shutdown_grace_s,
        lease_margin_s=settings.effective_lease_margin_s,
        timeout_grace_s=settings.timeout_grace_s,
        prefetch=settings.prefetch,
        prefetch_window_s=settings.prefetch_window_s,
    )


def store_timeout(values: Mapping[str, Any]) -> float:
    """The bound of every store call of the worker (``effective_store_timeout_s``)."""
    return WorkerSettings.model_validate(dict(values)).effective_store_timeout_s


class Container(containers.DeclarativeContainer):
    """Everything a worker process uses, built once."""

    config = providers.Configuration(strict=True)

    registry = providers.Dependency(instance_of=Registry)
    """The job types this worker runs (it claims only those)."""

    clock = providers.ThreadSafeSingleton(SystemClock)

    database_url = providers.ThreadSafeSingleton(
        _database_url, config.database_url, config.data_dir
    )
    store_timeout_s = providers.Callable(store_timeout, config)
    engine = providers.Resource(_engine, database_url, config.synchronous_commit, store_timeout_s)
    """The worker's engine for what is not the job store (the scheduler, the purge)."""
    store_engine = providers.Resource(
        _engine, database_url, config.synchronous_commit, store_timeout_s, for_store=True
    )
    """The job store's engine: the same sessions, with generic plans (STORE_SESSION_SETTINGS)."""
    store = providers.ThreadSafeSingleton(_postgres_store, store_engine)
    wakeup = providers.Factory(_postgres_wakeup, database_url)
    """A LISTEN connection; the worker closes it when it stops."""

    service = providers.ThreadSafeSingleton(
        JobService, store=store, registry=registry, clock=clock, fair_claim=config.fair_claim
    )
    worker_config = providers.Factory(worker_config, config)
    worker = providers.Factory(Worker, service=service, wakeup=wakeup, config=worker_config)


def build_container(settings: WorkerSettings, registry: Registry) -> Container:
    """A container configured from ``settings`` running the types of ``registry``."""
    container = Container(registry=registry)
    container.config.from_pydantic(settings)
    return container
