"""The composition root of the worker: one plain object that builds each part once, on first use.

:class:`Composition` is built from validated :class:`~jobs_worker.settings.WorkerSettings` and
the registry the worker runs (:func:`jobs_worker.registries.worker_registry` composes it). It
builds the PostgreSQL engines, the job store, the service and the worker when asked, and
:meth:`Composition.close` disposes the engines. Tests give it their own parts
(``Composition(settings, registry, store=InMemoryJobStore(), clock=FakeClock())``), never patch
modules. Why a plain object and not a dependency-injection container: decision 0026 (importing
dependency-injector's containers cost the worker half of its start-up).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jobs_core import Clock, JobService, JobStore, Registry, SystemClock, Wakeup
from jobs_core.observe import Observer
from jobs_core.tracing import NO_TRACER, Tracer, use_process_tracer

from jobs_worker.worker import Worker, WorkerConfig

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from jobs_worker.settings import WorkerSettings


def _engine(
    url: str, synchronous_commit: bool, store_timeout_s: float, for_store: bool = False
) -> Engine:
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
    if for_store:
        _say_what_the_role_needs(settings)
    engine = create_engine(
        url,
        pool_pre_ping=False,
        session_settings=settings,
        pool_timeout=max(1.0, store_timeout_s),
        connect_args=_connect_args(store_timeout_s, settings),
    )
    abort_stuck_calls(engine, store_timeout_s)
    return engine


def _say_what_the_role_needs(settings: Mapping[str, str]) -> None:
    """Behind a pooler in transaction mode, log the session settings not sent, as the
    ``ALTER ROLE`` statements that give them to the worker's role (docs/scaling.md)."""
    from jobs_postgres.database import (
        KEPT_PLAN_SETTINGS,
        pooler_mode,
        session_settings_left_out,
    )

    if pooler_mode() != "transaction":
        return
    left = {
        k: v for k, v in session_settings_left_out(settings).items() if k not in KEPT_PLAN_SETTINGS
    }
    statements = "; ".join(f"ALTER ROLE <worker role> SET {k} = '{v}'" for k, v in left.items())
    logging.getLogger("jobs.worker").info(
        "behind a pooler in transaction mode (JOBS_DATABASE_POOLER): no session setting is sent;"
        " give them to the worker's role (docs/scaling.md): %s",
        statements,
    )


def _connect_args(store_timeout_s: float, session: Mapping[str, str]) -> dict[str, Any]:
    from jobs_postgres.database import startup_connect_args
    from jobs_postgres.deadlines import bounded_connect_args

    return {
        # Direct: the session settings in the startup packet; behind a pooler in transaction
        # mode none, and no prepared statement (jobs_postgres.database.startup_connect_args).
        **startup_connect_args(session),
        # libpq counts whole seconds, at least 2
        "connect_timeout": max(2, math.ceil(store_timeout_s)),
        **bounded_connect_args(store_timeout_s),
    }


def worker_config(settings: WorkerSettings) -> WorkerConfig:
    """The :class:`WorkerConfig` of validated settings."""
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


class Composition:
    """Everything a worker process uses, each part built once, on first use (thread-safe).

    ``store``, ``wakeup`` (a factory: the worker closes each wake-up it gets) and ``clock``
    replace the PostgreSQL parts and the system clock (tests); the engines are then built only
    if something asks for them.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        registry: Registry,
        *,
        store: JobStore | None = None,
        wakeup: Callable[[], Wakeup] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self._store = store
        self._wakeup = wakeup
        self._clock = clock
        self._service: JobService | None = None
        self._url: str | None = None
        self._engines: dict[bool, Engine] = {}
        self._lock = threading.RLock()

    def clock(self) -> Clock:
        """The clock of every part (the system's unless given)."""
        with self._lock:
            if self._clock is None:
                self._clock = SystemClock()
            return self._clock

    def database_url(self) -> str:
        """``JOBS_DATABASE_URL``, else the embedded server's (started now if needed)."""
        with self._lock:
            if self._url is None:
                from jobs_postgres.database import resolve_database_url

                self._url = resolve_database_url(self.settings.database_url, self.settings.data_dir)
            return self._url

    def _engine(self, for_store: bool) -> Engine:
        with self._lock:
            engine = self._engines.get(for_store)
            if engine is None:
                engine = _engine(
                    self.database_url(),
                    self.settings.synchronous_commit,
                    self.settings.effective_store_timeout_s,
                    for_store=for_store,
                )
                self._engines[for_store] = engine
            return engine

    def engine(self) -> Engine:
        """The worker's engine for what is not the job store (the scheduler, the purge)."""
        return self._engine(False)

    def store_engine(self) -> Engine:
        """The job store's engine: the same sessions, with generic plans
        (``STORE_SESSION_SETTINGS``)."""
        return self._engine(True)

    def store(self) -> JobStore:
        """The job store (PostgreSQL unless given)."""
        with self._lock:
            if self._store is None:
                from jobs_postgres.store import PostgresJobStore

                self._store = PostgresJobStore(self.store_engine())
            return self._store

    def wakeup(self) -> Wakeup:
        """A new wake-up source (a LISTEN connection); the worker closes it when it stops.

        Behind a pooler in transaction mode the LISTEN needs a session of its own: it goes to
        ``JOBS_DIRECT_DATABASE_URL``; without one the worker polls (:class:`PollingWakeup`,
        every ``JOBS_POLL_INTERVAL_S``; said once in the log).
        """
        if self._wakeup is not None:
            return self._wakeup()
        from jobs_postgres.database import pooler_mode
        from jobs_postgres.wakeup import PollingWakeup, PostgresWakeup

        if self.settings.direct_database_url is not None:
            return PostgresWakeup(self.settings.direct_database_url)
        if pooler_mode() == "transaction":
            return PollingWakeup.stated(self.settings.poll_interval_s)
        return PostgresWakeup(self.database_url())

    def service(self) -> JobService:
        """The job use cases over the store, for the registry's types."""
        with self._lock:
            if self._service is None:
                self._service = JobService(
                    store=self.store(),
                    registry=self.registry,
                    clock=self.clock(),
                    fair_claim=self.settings.fair_claim,
                    worker=f"{socket.gethostname()}:{os.getpid()}",
                    observer=self._observer(),
                    tracer=self._tracer(),
                )
            return self._service

    def _tracer(self) -> Tracer:
        """OpenTelemetry's tracer with ``JOBS_TRACING=1`` (``jobs_tracing``, imported then
        only); otherwise :data:`~jobs_core.tracing.NO_TRACER`."""
        if not self.settings.tracing:
            return NO_TRACER
        from jobs_tracing import OtelTracer

        tracer = OtelTracer(org=self.settings.tracing_org)
        use_process_tracer(tracer)  # the children a module's service enqueues are traced too
        return tracer

    def _observer(self) -> Observer | None:
        """The metrics' observer when they are served (``--metrics-port``); otherwise none, and
        the metrics library is not even imported."""
        if self.settings.metrics_port is None:
            return None
        from jobs_metrics import PrometheusObserver

        return PrometheusObserver()

    def worker(self) -> Worker:
        """A new worker over the service; on PostgreSQL, the children its handlers enqueue
        (``ctx.enqueue``) are admitted under the orgs' quotas, as ``POST /jobs`` admits an
        enqueue (``JOBS_QUOTAS``, ``JOBS_QUOTA_*``: the deployment's, as the API reads them)."""
        worker = Worker(
            service=self.service(), wakeup=self.wakeup(), config=worker_config(self.settings)
        )
        if self._store is None:
            from jobs_worker.scheduler import scheduler_quotas

            worker.slots.admit_children = scheduler_quotas(self.engine(), self.clock()).admit
        return worker

    def close(self) -> None:
        """Dispose the engines built (each once); the parts are not usable after."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.dispose()
