"""Settings of the worker deployable, read from the environment (prefix ``JOBS_``).

Every field is also a command-line option of ``python -m jobs_worker`` / ``jobs worker`` (see
:mod:`jobs_worker.main`); an option given on the command line wins over the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from jobs_core.claims import FAIR_CLAIM_DEFAULT
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class WorkerSettings(BaseSettings):
    """What a worker process needs to know.

    - ``JOBS_DATABASE_URL``: the PostgreSQL server; unset, the embedded server under
      ``JOBS_DATA_DIR`` (``jobs_postgres.database.resolve_database_url``).
    - ``JOBS_DATABASE_POOLER``: ``none`` (default) or ``transaction`` when ``JOBS_DATABASE_URL``
      is PgBouncer in transaction pooling mode (docs/scaling.md).
    - ``JOBS_DIRECT_DATABASE_URL``: the server itself, for the one connection that needs a
      session (the LISTEN of wake-ups); unset behind a pooler in transaction mode, the worker
      polls every ``JOBS_POLL_INTERVAL_S`` instead (logged at start).
    - ``JOBS_CONCURRENCY``: slots, i.e. jobs run at once by this process (1: docs/contract.md §4).
    - ``JOBS_HEARTBEAT_S``: how often every running job's ``progress.updated_at`` is refreshed.
    - ``JOBS_SWEEP_INTERVAL_S`` / ``JOBS_SWEEP_THRESHOLD_S``: how often zombies are looked for, and
      how long a running job may stay silent before it is one (docs/contract.md §5).
    - ``JOBS_POLL_INTERVAL_S``: the fallback poll when no notification arrives, and how often
      the due end hooks of jobs ended elsewhere are run (docs/lifecycle.md).
    - ``JOBS_CANCEL_CHECK_S``: how often running jobs are checked for a cancellation request.
    - ``JOBS_SHUTDOWN_GRACE_S``: after SIGTERM/SIGINT, how long running jobs may take to finish
      before they are cancelled and handed back to the queue.
    - ``JOBS_LEASE_MARGIN_S``: a running handler whose lease the worker could not prove (no
      heartbeat written) for ``sweep threshold - margin`` is cancelled and the worker stops
      claiming; if the handler has not stopped ``margin / 2`` later the process exits (code 5).
      Default: a fifth of the threshold (docs/worker.md, "The lease fence").
    - ``JOBS_STORE_TIMEOUT_S``: the longest a store call of the worker may wait (statement and
      lock timeouts, TCP keepalives and user timeout, and a watchdog for a silent link); at most
      ``threshold - margin - heartbeat`` is used, so a healthy worker never fences itself.
    - ``JOBS_TIMEOUT_GRACE_S``: how long a handler that overran its type's timeout (its attempt
      already failed) may keep its slot before the worker stops claiming, hands its other jobs
      back and exits with code 4 for its supervisor to restart it.
    - ``JOBS_PREFETCH``: jobs a claim may take beyond the free slots while handlers are short
      (default 100; 0: never more than the free slots); ``JOBS_PREFETCH_WINDOW_S``: how long a
      prefetched job may expect to wait for a slot (default 0.05; docs/worker.md, "Prefetch").
    - ``JOBS_DEMO_TYPES``: register the demo types (``noop``, ``sleep``, ``fail``, ``crash``).
    - ``JOBS_EXTRA_REGISTRIES``: comma-separated ``module:attribute`` paths of more registries
      (a deployment's own job types, without editing this package).
    - ``JOBS_LOG_LEVEL`` / ``JOBS_LOG_FORMAT``: ``text`` (key=value) or ``json`` lines.
    - ``JOBS_HANDLERS_DIR``: a directory of ``<id>/manifest.yaml`` subprocess handlers
      (docs/subprocess-protocol.md); unset, none.
    - ``JOBS_ISOLATED_TYPES``: comma-separated types whose Python handler runs in a child process
      (default ``import_csv``; ``-`` for none).
    - ``JOBS_CHILD_KILL_GRACE_S``: between the SIGTERM and the SIGKILL of an isolated child.
    - ``JOBS_SYNCHRONOUS_COMMIT``: whether the worker's writes (claims, outcomes, heartbeats)
      wait for their WAL flush. On by default: a claim the worker acts on survives a crash of
      the PostgreSQL server, so a running job is never claimed a second time while its first
      worker still runs it (invariant 1). Off, a drain runs ~1.3x faster (bench/NOTES.md §3),
      and a server crash may forget the last fraction of a second of those writes: a job may
      then run twice, even at the same time on two workers until the first one's heartbeat
      finds its lease gone. A worker crash loses nothing either way.
    - ``JOBS_METRICS_PORT`` / ``JOBS_METRICS_HOST``: serve the worker's Prometheus metrics at
      ``http://HOST:PORT/metrics`` (default off; host 127.0.0.1; port 0: any free port, logged
      in ``worker.metrics``). docs/operations.md.
    - ``JOBS_TRACING``: ``1`` makes an OpenTelemetry span per attempt (``process {type}``,
      continuing the trace of the job's enqueue) and per child it enqueues (default off: no
      work per job). ``JOBS_TRACING_ORG=1`` adds the org id to the spans. docs/operations.md.
    - ``JOBS_FAIR_CLAIM``: claim in fair order between orgs (each org's first due job before the
      rest of its priority, orgs in turn; docs/flow-control.md). On by default
      (``jobs_core.claims.FAIR_CLAIM_DEFAULT``; decisions 0027, 0034); ``0``: first in, first out.
    """

    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    database_url: str | None = None
    database_pooler: str = "none"
    direct_database_url: str | None = None
    data_dir: Path = Path(".data")
    concurrency: int = Field(default=1, ge=1, le=1000)
    heartbeat_s: float = Field(default=30.0, gt=0)
    sweep_interval_s: float = Field(default=60.0, gt=0)
    sweep_threshold_s: float = Field(default=600.0, gt=0)
    poll_interval_s: float = Field(default=1.0, gt=0, le=60)
    cancel_check_s: float = Field(default=1.0, gt=0, le=60)
    shutdown_grace_s: float = Field(default=30.0, ge=0)
    lease_margin_s: float | None = Field(default=None, gt=0)
    store_timeout_s: float = Field(default=10.0, gt=0)
    timeout_grace_s: float = Field(default=30.0, gt=0)
    prefetch: int = Field(default=100, ge=0, le=10_000)
    prefetch_window_s: float = Field(default=0.05, ge=0, le=60)
    demo_types: bool = False
    extra_registries: Annotated[list[str], NoDecode] = Field(default_factory=list)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    synchronous_commit: bool = True
    handlers_dir: Path | None = None
    isolated_types: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["import_csv"])
    child_kill_grace_s: float = Field(default=5.0, ge=0)
    fair_claim: bool = FAIR_CLAIM_DEFAULT
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    tracing: bool = False
    tracing_org: bool = False

    @field_validator("isolated_types", mode="before")
    @classmethod
    def _split_types(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip() not in ("", "-")]
        return value

    @field_validator("extra_registries", mode="before")
    @classmethod
    def _split_registries(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("extra_registries")
    @classmethod
    def _check_registry_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            module, _, attribute = path.partition(":")
            if not module or not attribute:
                raise ValueError(f"{path!r} is not a 'module:attribute' path")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("database_pooler")
    @classmethod
    def _check_pooler_mode(cls, value: str) -> str:
        """One of ``jobs_postgres.database.POOLER_MODES`` (the one reader of the variable,
        ``pooler_mode``, which every engine asks): a wrong one fails at start."""
        from jobs_postgres.database import POOLER_ENV, pooler_mode

        return pooler_mode({POOLER_ENV: value})

    @field_validator("direct_database_url")
    @classmethod
    def _check_direct_url(cls, value: str | None) -> str | None:
        """A database URL, checked at start rather than at the first LISTEN."""
        from jobs_postgres.database import sqlalchemy_url

        if value is not None:
            sqlalchemy_url(value)
        return value

    @model_validator(mode="after")
    def _check_lease_timing(self) -> WorkerSettings:
        """The inequality of docs/worker.md ("The lease fence"), checked at start:
        heartbeat + store timeout + margin <= sweep threshold."""
        room = self.sweep_threshold_s - self.effective_lease_margin_s - self.effective_heartbeat_s
        if room < 0.05:
            raise ValueError(
                f"the lease margin ({self.effective_lease_margin_s:g} s) leaves no time for a"
                f" heartbeat ({self.effective_heartbeat_s:g} s) and a store call within the sweep"
                f" threshold ({self.sweep_threshold_s:g} s): heartbeat + store timeout + margin"
                " must fit in the threshold; lower JOBS_LEASE_MARGIN_S or raise"
                " JOBS_SWEEP_THRESHOLD_S"
            )
        return self

    @property
    def effective_lease_margin_s(self) -> float:
        """The lease margin used: ``lease_margin_s``, or a fifth of the sweep threshold."""
        if self.lease_margin_s is not None:
            return self.lease_margin_s
        return self.sweep_threshold_s / 5

    @property
    def effective_store_timeout_s(self) -> float:
        """The store call bound used: ``store_timeout_s``, at most what is left of the
        threshold after the margin and one heartbeat period (so a slow but healthy link never
        fences a worker)."""
        room = self.sweep_threshold_s - self.effective_lease_margin_s - self.effective_heartbeat_s
        return min(self.store_timeout_s, room)

    @property
    def effective_heartbeat_s(self) -> float:
        """The heartbeat period actually used: at most a third of the sweep threshold.

        A heartbeat as slow as the threshold would let the sweep take a live job for a zombie
        (invariant 6), so a short threshold (``jobs dev`` uses 30 s) shortens the heartbeat too.
        """
        return min(self.heartbeat_s, self.sweep_threshold_s / 3)
