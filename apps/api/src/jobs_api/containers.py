"""The composition root of the API: one dependency-injector container.

``config`` comes from :class:`~jobs_api.settings.ApiSettings`; ``registry`` is an input (the
deployable that starts the API composes the modules' registries, see :func:`compose_registry`);
``store`` and ``token_store`` are picked by ``config.store`` (``memory`` or ``postgres``) with a
``Selector``; the PostgreSQL engine is a ``Resource`` created on first use and disposed at
shutdown. Tests override providers (``container.store.override(...)``), never modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dependency_injector import containers, providers
from jobs_core import InMemoryJobStore, JobService, JobStore, Registry, SystemClock
from jobs_core.tokens import (
    InMemorySessionStore,
    InMemoryTokenStore,
    SessionStore,
    TokenCache,
    TokenStore,
)

from jobs_api.events import EventHub
from jobs_api.settings import ApiSettings

if TYPE_CHECKING:
    from jobs_core import Clock
    from jobs_core.events import EventFeed
    from jobs_imports.registry import ImportsModule
    from sqlalchemy import Engine


def _database_url(url: str | None, data_dir: Path) -> str:
    from jobs_postgres.database import resolve_database_url

    return resolve_database_url(url, data_dir)


POOL_MARGIN = 5
"""Connections beyond the thread count the pool may open (and closes again on return): for a
request that ever needs two at once; routes use one at a time, so it stays unused."""


def _engine(url: str, threads: int) -> Iterator[Engine]:
    from jobs_postgres.database import create_engine

    # Every blocking call runs on one of ``threads`` threads with one connection at a time: a
    # pool that keeps that many open means no connection is opened and closed per request.
    # (The default 10 + 20 overflow below the thread pool's 40 threads reopened connections
    # under load: bench/NOTES.md §5.) Connections open lazily: an idle API holds few. LIFO:
    # the connection returned last is used next, so a light load keeps reusing a few recently
    # used connections (no idle check to pay) and the others stay idle.
    engine = create_engine(url, pool_size=threads, max_overflow=POOL_MARGIN, pool_use_lifo=True)
    try:
        yield engine
    finally:
        engine.dispose()


def _postgres_store(engine: Engine) -> JobStore:
    from jobs_postgres.store import PostgresJobStore

    return PostgresJobStore(engine)


def _postgres_token_store(engine: Engine) -> TokenStore:
    from jobs_postgres.tokens import PostgresTokenStore

    return PostgresTokenStore(engine)


def _postgres_session_store(engine: Engine, clock: Clock) -> SessionStore:
    from jobs_postgres.sessions import PostgresSessionStore

    return PostgresSessionStore(engine, clock)


def _memory_event_feed(store: JobStore) -> EventFeed:
    if not isinstance(store, InMemoryJobStore):
        raise TypeError("the memory event feed needs the in-memory store")
    return store.events


def _postgres_event_feed(engine: Engine) -> EventFeed:
    from jobs_postgres.events import PostgresEventFeed

    return PostgresEventFeed(engine)


def _imports_module(
    engine: Engine,
    data_dir: Path | str,
    max_upload_bytes: int,
    clock: Clock,
    allow_private_urls: bool = False,
) -> ImportsModule:
    from jobs_imports.registry import build_module

    return build_module(
        engine,
        Path(data_dir),
        clock=clock,
        max_upload_bytes=max_upload_bytes,
        allow_private_urls=bool(allow_private_urls),
    )


IMPORTS_MODULE = "jobs_imports"


def serves_imports(modules: Iterable[str], store: str) -> bool:
    """True when the API serves the Imports module: named by the deployable, on PostgreSQL
    (the module's tables live there)."""
    return IMPORTS_MODULE in modules and store == "postgres"


def _served_registry(
    registry: Registry, modules: list[str], store: str, imports: Callable[[], ImportsModule]
) -> Registry:
    """``registry`` plus the types of the served modules it lacks: the service must know them
    (e.g. that ``map_reconcile`` jobs are never deletable) even when the deployable did not
    compose them in."""
    if not serves_imports(modules, store):
        return registry
    composed = Registry(registry.name)
    composed.include(registry)
    for job_type in imports().registry:
        if job_type.name not in composed:
            composed.register(job_type)
    return composed


class Container(containers.DeclarativeContainer):
    """Everything the API routes use, built once per app."""

    config = providers.Configuration(strict=True)

    registry = providers.Dependency(instance_of=Registry)
    """The job types the API accepts (only the ``public`` ones over HTTP)."""

    clock = providers.ThreadSafeSingleton(SystemClock)

    database_url = providers.ThreadSafeSingleton(
        _database_url, config.database_url, config.data_dir
    )
    engine = providers.Resource(_engine, database_url, config.api_threads)

    store = providers.Selector(
        config.store,
        memory=providers.ThreadSafeSingleton(InMemoryJobStore),
        postgres=providers.ThreadSafeSingleton(_postgres_store, engine),
    )
    token_store = providers.Selector(
        config.store,
        memory=providers.ThreadSafeSingleton(InMemoryTokenStore, clock),
        postgres=providers.ThreadSafeSingleton(_postgres_token_store, engine),
    )

    token_cache = providers.ThreadSafeSingleton(
        TokenCache, token_store, clock, config.api_token_cache_s
    )
    """What ``current_org`` asks: the token store behind a short-lived cache of live tokens."""

    session_store = providers.Selector(
        config.store,
        memory=providers.ThreadSafeSingleton(InMemorySessionStore, token_store, clock),
        postgres=providers.ThreadSafeSingleton(_postgres_session_store, engine, clock),
    )
    session_cache = providers.ThreadSafeSingleton(
        TokenCache, session_store, clock, config.api_token_cache_s
    )
    """Browser sessions (docs/sessions.md), behind the same short-lived cache as tokens."""

    event_feed = providers.Selector(
        config.store,
        memory=providers.Callable(_memory_event_feed, store),
        postgres=providers.ThreadSafeSingleton(_postgres_event_feed, engine),
    )
    event_hub = providers.ThreadSafeSingleton(
        EventHub,
        event_feed,
        config.events_poll_s,
        config.events_retention_s,
        config.events_client_buffer,
    )
    """The one reader of the event feed of this process (docs/events.md)."""

    imports = providers.ThreadSafeSingleton(
        _imports_module,
        engine,
        config.data_dir,
        config.max_upload_bytes,
        clock,
        config.allow_private_urls,
    )
    """The Imports module (PostgreSQL only): its routes' use cases and its job types."""

    service_registry = providers.ThreadSafeSingleton(
        _served_registry, registry, config.modules, config.store, imports.provider
    )

    service = providers.ThreadSafeSingleton(
        JobService, store=store, registry=service_registry, clock=clock
    )


def compose_registry(
    registries: Iterable[Registry],
    development: Iterable[Registry] = (),
    development_over_http: bool = False,
) -> Registry:
    """One registry holding the types of every module registry given (a name twice is an
    error). The CLI passes the modules it enables; ``development`` registries (the demo types
    with ``JOBS_DEMO_TYPES=1``) are served to the service, but their types are enqueueable
    over HTTP only with ``development_over_http`` (``JOBS_DEMO_OVER_HTTP``): otherwise they
    are internal, answered as unknown by ``POST /jobs`` and absent from the OpenAPI document."""
    composed = Registry("api")
    for registry in registries:
        composed.include(registry)
    for registry in development:
        for job_type in registry:
            composed.register(
                job_type if development_over_http else dataclasses.replace(job_type, public=False)
            )
    return composed


def build_container(
    settings: ApiSettings | None = None,
    registries: Iterable[Registry] = (),
    modules: Iterable[str] = (),
    development: Iterable[Registry] = (),
) -> Container:
    """A container configured from ``settings`` (else the environment) serving the job types
    of ``registries`` and the routes of ``modules`` (``jobs_imports``: the Imports routes, on
    the postgres store); the types of ``development`` registries (the demo types) are public
    over HTTP only with ``settings.demo_over_http``."""
    settings = settings or ApiSettings()
    container = Container(
        registry=compose_registry(registries, development, settings.demo_over_http)
    )
    container.config.from_pydantic(settings)
    container.config.modules.from_value(list(modules))
    return container
