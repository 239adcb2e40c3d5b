"""The composition root of the API: one dependency-injector container.

``config`` comes from :class:`~jobs_api.settings.ApiSettings`; ``base_registry`` and ``modules``
are inputs (the deployable loads the module declarations, :func:`jobs_core.modules.discover`);
``registry`` composes them, each module built with ``module_context`` (the API's engine);
``store`` and ``token_store`` are picked by ``config.store`` (``memory`` or ``postgres``) with a
``Selector``; the PostgreSQL engine is a ``Resource`` created on first use and disposed at
shutdown. Tests override providers (``container.store.override(...)``), never modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dependency_injector import containers, providers
from jobs_core import InMemoryJobStore, JobService, JobStore, Registry, SystemClock
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import InMemoryQuotaStore, Quotas, QuotaStore
from jobs_metrics import PrometheusObserver
from jobs_tokens import (
    InMemorySessionStore,
    InMemoryTokenStore,
    SessionStore,
    TokenCache,
    TokenStore,
)

from jobs_api.event_hub import EventHub
from jobs_api.reads import Reads
from jobs_api.settings import ApiSettings
from jobs_api.stream_limits import StreamLimits
from jobs_api.tracing import api_tracer

if TYPE_CHECKING:
    from jobs_core import Clock
    from jobs_core.events import EventFeed
    from jobs_core.modules import Module, ModuleContext
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
    engine = create_engine(url, pool_size=threads, max_overflow=POOL_MARGIN)
    try:
        yield engine
    finally:
        engine.dispose()


def _read_engine(url: str | None, threads: int) -> Iterator[Engine | None]:
    if url is None:
        yield None
        return
    yield from _engine(url, threads)


def _postgres_reads(
    primary: JobService, engine: Engine, read_engine: Engine | None, registry: Registry
) -> Reads:
    """Reads from the standby of ``JOBS_READ_DATABASE_URL`` when there is one (jobs_api.reads)."""
    if read_engine is None:
        return Reads(primary)
    from jobs_postgres.events import PostgresEventFeed
    from jobs_postgres.replica import PostgresWalPositions
    from jobs_postgres.store import PostgresJobStore

    standby = JobService(PostgresJobStore(read_engine), registry, primary.clock)
    return Reads(
        primary,
        standby,
        positions=PostgresWalPositions(engine, read_engine),
        standby_history=PostgresEventFeed(read_engine),
    )


def _postgres_store(engine: Engine) -> JobStore:
    from jobs_postgres.store import PostgresJobStore

    return PostgresJobStore(engine)


def _postgres_quota_store(engine: Engine) -> QuotaStore:
    from jobs_postgres.quotas import PostgresQuotaStore

    return PostgresQuotaStore(engine)


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


def _no_engine() -> None:
    return None


def _module_context(
    engine: Engine | None, data_dir: Path | str, settings: dict[str, str], clock: Clock
) -> ModuleContext:
    from jobs_core.modules import ModuleContext

    return ModuleContext(
        engine=engine,
        database_url=engine.url.render_as_string(hide_password=False) if engine else None,
        data_dir=Path(data_dir),
        settings=settings,
        clock=clock,
    )


def _served_registry(
    base: Registry,
    modules: Sequence[Module],
    context: ModuleContext,
    development_over_http: bool,
) -> Registry:
    """``base`` plus the types of the served modules (:func:`jobs_core.modules.servable`:
    on the memory store, only those that own no tables); the types of a ``development``
    module (the demo types) are internal unless ``development_over_http``. A type declared
    twice is an error naming both modules."""
    from jobs_core.modules import compose_modules, servable

    served = servable(modules, context)
    regular, _ = compose_modules([m for m in served if not m.development], context, "api")
    development, _ = compose_modules([m for m in served if m.development], context, "dev")
    return compose_registry([base, regular], [development], bool(development_over_http))


class Container(containers.DeclarativeContainer):
    """Everything the API routes use, built once per app."""

    config = providers.Configuration(strict=True)

    base_registry = providers.Dependency(instance_of=Registry)
    """The job types given by the deployable besides the modules' (manifests, extra ones)."""

    modules = providers.Dependency(instance_of=tuple, default=())
    """The module declarations served (:func:`jobs_core.modules.discover`): their types, their
    routes (mounted by :func:`jobs_api.app.create_app`)."""

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

    stream_limits = providers.Singleton(
        StreamLimits,
        config.events_max_streams_per_token,
        config.events_max_streams_per_org,
    )
    """The open event streams of this process per token or session and per org, capped."""

    module_settings = providers.Dependency(instance_of=dict, default={})
    """The settings the modules read (``JOBS_*`` names: the environment and this API's)."""

    module_engine = providers.Selector(
        config.store, memory=providers.Callable(_no_engine), postgres=engine
    )
    module_context = providers.ThreadSafeSingleton(
        _module_context, module_engine, config.data_dir, module_settings, clock
    )
    """What the modules' builders get: the API's engine (None on the memory store)."""

    registry = providers.ThreadSafeSingleton(
        _served_registry, base_registry, modules, module_context, config.demo_over_http
    )
    """The job types the API accepts (only the ``public`` ones over HTTP): the deployable's
    and the served modules'."""

    tracer = providers.ThreadSafeSingleton(api_tracer, config.tracing, config.tracing_org)
    """Spans of the enqueues (``JOBS_TRACING``, decision 0039); tests override it."""

    service_registry = registry
    service = providers.ThreadSafeSingleton(
        JobService,
        store=store,
        registry=service_registry,
        clock=clock,
        observer=providers.Factory(PrometheusObserver),
        tracer=tracer,
    )

    read_engine = providers.Resource(_read_engine, config.read_database_url, config.api_threads)
    reads = providers.Selector(
        config.store,
        memory=providers.ThreadSafeSingleton(Reads, service),
        postgres=providers.ThreadSafeSingleton(
            _postgres_reads, service, engine, read_engine, service_registry
        ),
    )
    """Where the org's reads go: the primary, or the standby of ``JOBS_READ_DATABASE_URL``
    with read-your-writes (:mod:`jobs_api.reads`)."""

    quota_store = providers.Selector(
        config.store,
        memory=providers.ThreadSafeSingleton(InMemoryQuotaStore, store),
        postgres=providers.ThreadSafeSingleton(_postgres_quota_store, engine),
    )
    quota_defaults = providers.ThreadSafeSingleton(
        Quotas,
        max_schedules=config.quota_max_schedules,
        min_schedule_interval_s=config.quota_min_schedule_interval_s,
        max_queued=config.quota_max_queued,
        enqueue_rate=config.quota_enqueue_rate,
        enqueue_burst=config.quota_enqueue_burst,
    )
    quotas = providers.ThreadSafeSingleton(
        QuotaService,
        quota_store,
        quota_defaults,
        clock,
        enabled=config.quotas,
        refresh_s=config.quota_refresh_s,
    )
    """Quotas per org (docs/flow-control.md): what a tenant's enqueue and schedules are held to."""


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
        composed.include(registry, internal=not development_over_http)
    return composed


def build_container(
    settings: ApiSettings | None = None,
    registries: Iterable[Registry] = (),
    modules: Iterable[Module] = (),
    development: Iterable[Registry] = (),
) -> Container:
    """A container configured from ``settings`` (else the environment) serving the job types
    of ``registries`` and the types and routes of ``modules`` (module declarations: the API
    mounts their routers; those that own tables only on the postgres store); the types of
    ``development`` registries and modules (the demo types) are public over HTTP only with
    ``settings.demo_over_http``."""
    from jobs_postgres.modules import module_settings

    settings = settings or ApiSettings()
    container = Container(
        base_registry=compose_registry(registries, development, settings.demo_over_http),
        modules=tuple(modules),
        module_settings=module_settings(
            max_upload_bytes=settings.max_upload_bytes,
            allow_private_urls=settings.allow_private_urls,
            max_body_bytes=settings.max_body_bytes,
            store=settings.store,
            demo_over_http=settings.demo_over_http,
        ),
    )
    container.config.from_pydantic(settings)
    return container
