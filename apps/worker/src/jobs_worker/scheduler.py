"""The scheduler and the built-in purge, run inside every worker process.

- :class:`Scheduler`: a thread that fires the due schedules every ``JOBS_SCHEDULER_INTERVAL_S``
  (1 s), a tenant's within its org's queued quota (:func:`scheduler_quotas`). Every worker
  process runs one (``JOBS_SCHEDULER=0`` switches it off in a process); the store makes N of
  them enqueue exactly one job per tick (docs/schedules.md).
- :class:`Maintenance`: the ``jobs.purge`` job type and its built-in schedule (daily at 04:00
  UTC by default, ``purge_cron`` in the run-time settings), which applies the retention
  policies in bounded batches (docs/retention.md).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from jobs_core import JobContext, Registry, StoreUnavailable
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import quotas_from_environ
from jobs_core.retention import RetentionSettings, purge
from jobs_core.schedules import MissedPolicy, Schedule, ScheduleInvalid
from jobs_core.scheduling import ScheduleService
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobs_worker.logs import log_event

if TYPE_CHECKING:
    from jobs_core import Clock
    from sqlalchemy import Engine

log = logging.getLogger("jobs.scheduler")

SYSTEM_ORG = "system"
"""The org of the built-in maintenance jobs (``jobs ls --org system`` lists them)."""
PURGE_TYPE = "jobs.purge"
PURGE_SCHEDULE = "jobs.purge"


class SchedulerSettings(BaseSettings):
    """``JOBS_SCHEDULER`` (default on): run the scheduler thread in this worker process;
    ``JOBS_SCHEDULER_INTERVAL_S`` (default 1): seconds between two looks for due schedules."""

    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    scheduler: bool = True
    scheduler_interval_s: float = Field(default=1.0, gt=0, le=60)


class Maintenance:
    """The built-in maintenance module: the ``jobs.purge`` type, whose handler needs the
    engine and the worker's whole registry (bound once the worker is composed)."""

    def __init__(self) -> None:
        self.registry = Registry("maintenance")
        self._engine: Callable[[], Engine] | None = None
        self._types: Registry | None = None
        self._clock: Clock | None = None
        from jobs_core import JobType

        self.registry.register(
            JobType(
                name=PURGE_TYPE,
                handler=self._purge,
                max_attempts=3,
                description="Delete finished jobs by the retention policies, in batches.",
            )
        )

    def bind(self, engine: Callable[[], Engine], registry: Registry, clock: Clock) -> None:
        """Give the purge its database and the registry whose policies it applies."""
        self._engine, self._types, self._clock = engine, registry, clock

    def settings(self) -> RetentionSettings:
        """The run-time retention settings."""
        from jobs_postgres.retention import PostgresSettingsStore

        return PostgresSettingsStore(self._bound()[0]()).load()

    def declared(self, settings: RetentionSettings) -> Schedule:
        """The built-in purge schedule, at the time the settings say."""
        return Schedule(
            name=PURGE_SCHEDULE,
            org_id=SYSTEM_ORG,
            job_type=PURGE_TYPE,
            cron=settings.purge_cron,
            timezone=settings.purge_timezone,
            missed=MissedPolicy.ONCE,
            description="built-in: applies the retention policies (jobs settings)",
        )

    def _bound(self) -> tuple[Callable[[], Engine], Registry, Clock]:
        if self._engine is None or self._types is None or self._clock is None:
            raise RuntimeError("Maintenance.bind() was not called")
        return self._engine, self._types, self._clock

    def _purge(self, ctx: JobContext) -> dict[str, Any]:
        from jobs_postgres.retention import PostgresRetentionStore
        from jobs_postgres.schedules import PostgresScheduleStore

        engine_of, registry, clock = self._bound()
        engine = engine_of()
        settings = self.settings()
        removed = 0

        def on_batch(type_name: str, bucket: str, count: int) -> None:
            nonlocal removed
            removed += count
            ctx.report_progress(done=removed, last=f"{type_name} {bucket}: -{count}")

        report = purge(
            PostgresRetentionStore(engine),
            registry,
            settings,
            clock.now(),
            on_batch=on_batch,
            should_stop=lambda: ctx.cancelled,
        )
        runs = PostgresScheduleStore(engine).trim_runs()
        return {**report.to_dict(), "schedule_runs_trimmed": runs}


class Scheduler:
    """A daemon thread that stores the declared schedules, then fires the due ones."""

    def __init__(
        self,
        service: ScheduleService,
        declared: Callable[[], list[Schedule]],
        interval_s: float,
    ) -> None:
        self.service = service
        self.declared = declared
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobs-scheduler", daemon=True)
        self.fired = 0

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread (the current pass ends first)."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        synced = False
        backoff = self.interval_s
        while not self._stop.is_set():
            try:
                if not synced:
                    self.service.declare(self.declared())
                    synced = True
                for fired in self.service.tick():
                    self.fired += len(fired.job_ids)
                    log_event(
                        log,
                        logging.INFO,
                        "schedule.fired",
                        org=fired.org_id,
                        schedule=fired.name,
                        jobs=len(fired.job_ids),
                        dropped=fired.dropped,
                        next_run_at=fired.next_run_at.isoformat(),
                    )
                backoff = self.interval_s
            except StoreUnavailable as error:
                log_event(log, logging.WARNING, "scheduler.store_unavailable", error=str(error))
                backoff = min(backoff * 2, 30.0)
            except ScheduleInvalid as error:
                # A bad declaration in code: said loudly, retried (a fix needs a restart).
                log_event(log, logging.ERROR, "scheduler.invalid_declaration", error=str(error))
                backoff = 60.0
            except Exception:
                log.exception("the scheduler pass failed; trying again")
                backoff = min(backoff * 2, 30.0)
            self._stop.wait(backoff)


def scheduler_quotas(engine: Engine, clock: Clock) -> QuotaService:
    """The quotas a tenant's schedules fire within (``JOBS_QUOTAS`` and ``JOBS_QUOTA_*``, as the
    API reads them): a tick of an org at its queued quota is dropped (docs/schedules.md)."""
    from jobs_postgres.quotas import PostgresQuotaStore

    enabled, defaults = quotas_from_environ(os.environ)
    return QuotaService(PostgresQuotaStore(engine), defaults, clock, enabled=enabled)


@contextmanager
def running_scheduler(
    engine: Callable[[], Engine], registry: Registry, maintenance: Maintenance, clock: Clock
) -> Iterator[Scheduler | None]:
    """Bind the purge, and run the scheduler for the block (unless ``JOBS_SCHEDULER=0``)."""
    maintenance.bind(engine, registry, clock)
    settings = SchedulerSettings()
    if not settings.scheduler:
        yield None
        return
    from jobs_postgres.cron import CronsimCron
    from jobs_postgres.schedules import PostgresScheduleStore

    service = ScheduleService(
        PostgresScheduleStore(engine()),
        registry,
        CronsimCron(),
        clock,
        scheduler_quotas(engine(), clock),
    )

    def declared() -> list[Schedule]:
        return [maintenance.declared(maintenance.settings()), *registry.schedules]

    scheduler = Scheduler(service, declared, settings.scheduler_interval_s)
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.stop()
