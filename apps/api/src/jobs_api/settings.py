"""Settings of the API deployable, read from the environment (prefix ``JOBS_``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from jobs_core.quotas import DEFAULT_QUOTAS
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024


class ApiSettings(BaseSettings):
    """What the API needs to know about its environment.

    - ``JOBS_DATABASE_URL``: the PostgreSQL server; unset, the embedded server under
      ``JOBS_DATA_DIR`` is used (``jobs_postgres.database.resolve_database_url``).
    - ``JOBS_DATABASE_POOLER``: ``none`` (default) or ``transaction`` when ``JOBS_DATABASE_URL``
      is PgBouncer in transaction pooling mode (read by ``jobs_postgres.database.pooler_mode``).
    - ``JOBS_READ_DATABASE_URL``: a streaming standby of that server; the org's job reads (list,
      detail, counts) and the event stream's replays go there, an org's reads to the primary
      until the standby has replayed its own last write (docs/scaling.md). Unset: the primary.
    - ``JOBS_STORE``: ``postgres`` (the default, the deployable) or ``memory`` (a throwaway store,
      for trying the API or testing it without a database).
    - ``JOBS_DEMO_TYPES``: whether the entry point that composes the registry adds the demo types.
    - ``JOBS_HANDLERS_DIR``: a directory of ``<id>/manifest.yaml`` job types run as child
      processes (docs/subprocess-protocol.md); ``python -m jobs_api`` serves them (``jobs api``
      reads the variable itself). Give it the same directory as the workers.
    - ``JOBS_DEMO_OVER_HTTP``: a development flag (``jobs dev`` sets it): the demo types may be
      enqueued over HTTP by any token. Off, they are served to the CLI and the workers only, and
      ``POST /jobs`` answers them as unknown types (``crash`` kills a worker).
    - ``JOBS_ALLOW_PRIVATE_URLS``: a development opt-out: site targets and pages may point at
      loopback, private, link-local and other non-public addresses (refused by default: a
      crawler fetching them would reach the internal network).
    - ``JOBS_MAX_BODY_BYTES``: request bodies larger than this are refused with 413.
    - ``JOBS_MAX_UPLOAD_BYTES``: the largest file ``POST /imports/csv`` accepts (413 beyond);
      uploads are stored under ``JOBS_DATA_DIR``, which the workers must share.
    - ``JOBS_LIST_FIELD_BYTES``: in ``GET /jobs``, a job's payload, progress or report whose
      JSON is larger is left out (null, named in ``truncated``); ``GET /jobs/{id}`` has it.
    - ``JOBS_API_TOKEN_CACHE_S``: how long the API trusts a token it has found live without
      asking the token store again (``0``: ask on every request). A revocation takes effect
      within this time (decision 0005).
    - ``JOBS_API_THREADS``: the threads that run the routes' blocking calls; the engine's pool
      holds as many connections, so none is opened and closed per request under load.
    - ``JOBS_QUOTAS`` (on) and ``JOBS_QUOTA_*``: the quotas per org and their defaults
      (docs/flow-control.md, "Quotas per org"); an operator changes one org's with
      ``jobs quotas set`` or ``PUT /settings/quotas/{org}``. ``JOBS_QUOTA_REFRESH_S``: how long
      a process trusts the quotas and the queued count it read of an org.
    - ``JOBS_SESSION_*``: browser sessions (docs/sessions.md); ``JOBS_EVENTS*``: the event
      stream (docs/events.md), its caps ``JOBS_EVENTS_MAX_STREAMS_PER_TOKEN`` (a token or a
      session) and ``_PER_ORG``, per API process (429 past them).
    - ``JOBS_TRACING``: ``1`` makes an OpenTelemetry producer span per enqueue, a child of the
      request's ``traceparent``, whose context the job carries to its worker (default off).
      ``JOBS_TRACING_ORG=1`` adds the org id to the spans. docs/operations.md, "Traces".
    """

    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    database_url: str | None = None
    database_pooler: str = "none"
    read_database_url: str | None = None
    data_dir: Path = Path(".data")
    store: Literal["postgres", "memory"] = "postgres"
    demo_types: bool = False
    demo_over_http: bool = False
    handlers_dir: Path | None = None
    allow_private_urls: bool = False
    max_body_bytes: int = Field(default=MIB, ge=1)
    max_upload_bytes: int = Field(default=512 * MIB, ge=1)
    list_field_bytes: int = Field(default=16 * 1024, ge=256)
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=0, le=65535)
    api_token_cache_s: float = Field(default=5.0, ge=0)
    api_threads: int = Field(default=40, ge=1, le=1000)
    # Browser sessions (docs/sessions.md) and the event stream (docs/events.md).
    session_ttl_s: float = Field(default=8 * 3600, gt=0)
    session_cookie: str = Field(default="jobs_session", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    events: bool = True
    events_keepalive_s: float = Field(default=15.0, gt=0, le=15)
    events_client_buffer: int = Field(default=1000, ge=1)
    events_poll_s: float = Field(default=0.1, gt=0, le=10)
    events_retention_s: float = Field(default=3600.0, gt=0)
    events_max_streams_per_token: int = Field(default=10, ge=1)
    events_max_streams_per_org: int = Field(default=100, ge=1)
    operator_orgs: str = ""
    """Comma-separated orgs whose tokens may change the retention settings and the quotas over
    HTTP (and whose schedules may tick more often than the tenants' minimum interval)."""
    # Quotas per org (jobs_core.quotas; the defaults are Quotas()'s).
    quotas: bool = True
    quota_max_schedules: int = Field(default=DEFAULT_QUOTAS.max_schedules, ge=0)
    quota_min_schedule_interval_s: int = Field(default=DEFAULT_QUOTAS.min_schedule_interval_s, ge=1)
    quota_max_queued: int = Field(default=DEFAULT_QUOTAS.max_queued, ge=0)
    quota_enqueue_rate: float = Field(default=DEFAULT_QUOTAS.enqueue_rate, gt=0)
    quota_enqueue_burst: int = Field(default=DEFAULT_QUOTAS.enqueue_burst, ge=1)
    quota_refresh_s: float = Field(default=1.0, ge=0, le=60)
    tracing: bool = False
    tracing_org: bool = False

    @field_validator("database_pooler")
    @classmethod
    def _check_pooler_mode(cls, value: str) -> str:
        """One of ``jobs_postgres.database.POOLER_MODES`` (the one reader of the variable,
        ``pooler_mode``, which every engine asks): a wrong one fails at start."""
        from jobs_postgres.database import POOLER_ENV, pooler_mode

        return pooler_mode({POOLER_ENV: value})

    @field_validator("read_database_url")
    @classmethod
    def _check_read_url(cls, value: str | None) -> str | None:
        """A database URL, checked at start rather than at the first read."""
        from jobs_postgres.database import sqlalchemy_url

        if value is not None:
            sqlalchemy_url(value)
        return value

    @field_validator("handlers_dir", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value
