"""``/schedules`` (org-scoped CRUD of cron schedules) and ``/settings/retention`` (the run-time
retention settings), issue 17.

Each route acts for the org of the bearer token (the same dependency as ``/jobs``): another
org's schedule answers 404 like an absent one. An org schedules only the public job types it
may enqueue over ``POST /jobs``. The retention settings are global: any token reads them; only a
token of an org listed in ``JOBS_OPERATOR_ORGS`` changes them (403 otherwise; decision 0018).
Both are served on the PostgreSQL store only (``JOBS_STORE=postgres``, the default): the
tables live there.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Request, Response
from jobs_core.retention import RetentionInvalid, RetentionSettings
from jobs_core.schedules import (
    TEXT_LIMITS,
    ScheduleDeclared,
    ScheduleExists,
    ScheduleInvalid,
    ScheduleNotFound,
    ScheduleState,
)
from jobs_core.scheduling import ScheduleService, schedule_from_fields
from pydantic import BaseModel, ConfigDict, Field

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem, problem_responses
from jobs_api.quotas import admit, operator_orgs, quota_service

if TYPE_CHECKING:
    from jobs_api.containers import Container

router = APIRouter(tags=["schedules"])


class ScheduleIn(BaseModel):
    """A new schedule."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        max_length=TEXT_LIMITS["name"],
        description="Unique in the org: lowercase letters, digits, _ . : -",
    )
    type: str = Field(max_length=TEXT_LIMITS["job_type"], description="A public job type.")
    cron: str = Field(
        max_length=TEXT_LIMITS["cron"],
        description="5 fields, or 6 with the seconds first; e.g. `0 4 * * *`.",
    )
    timezone: str = Field(default="UTC", max_length=TEXT_LIMITS["timezone"])
    payload: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True
    missed: Literal["skip", "once", "each"] = "once"
    max_catchup: int = 10
    description: str = Field(default="", max_length=TEXT_LIMITS["description"])


class ScheduleChange(BaseModel):
    """Fields to change (absent ones stay)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=TEXT_LIMITS["name"])
    type: str | None = Field(default=None, max_length=TEXT_LIMITS["job_type"])
    cron: str | None = Field(default=None, max_length=TEXT_LIMITS["cron"])
    timezone: str | None = Field(default=None, max_length=TEXT_LIMITS["timezone"])
    payload: dict[str, Any] | None = None
    enabled: bool | None = None
    missed: Literal["skip", "once", "each"] | None = None
    max_catchup: int | None = None
    description: str | None = Field(default=None, max_length=TEXT_LIMITS["description"])


class ScheduleOut(BaseModel):
    """A schedule, its next tick and its last run's job."""

    name: str
    type: str
    cron: str
    timezone: str
    payload: dict[str, Any]
    enabled: bool
    missed: str
    max_catchup: int
    description: str
    source: str
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: str | None

    @classmethod
    def of(cls, state: ScheduleState) -> ScheduleOut:
        s = state.schedule
        return cls(
            name=s.name,
            type=s.job_type,
            cron=s.cron,
            timezone=s.timezone,
            payload=dict(s.payload),
            enabled=s.enabled,
            missed=s.missed.value,
            max_catchup=s.max_catchup,
            description=s.description,
            source=state.source,
            next_run_at=state.next_run_at,
            last_run_at=state.last_run_at,
            last_job_id=None if state.last_job_id is None else str(state.last_job_id),
        )


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


def _service(request: Request) -> ScheduleService | None:
    cached: ScheduleService | None = getattr(request.app.state, "schedule_service", None)
    if cached is not None:
        return cached
    container = _container(request)
    if container.config.store() != "postgres":
        return None
    from jobs_postgres.cron import CronsimCron
    from jobs_postgres.schedules import PostgresScheduleStore

    service = ScheduleService(
        PostgresScheduleStore(container.engine()),
        container.service_registry(),
        CronsimCron(),
        container.clock(),
    )
    request.app.state.schedule_service = service
    return service


def _unavailable() -> Response:
    return problem(
        501,
        "schedules need the PostgreSQL store: run the API with JOBS_STORE=postgres",
        kind="not-implemented",
    )


def _not_found(name: str) -> Response:
    return problem(404, f"no schedule named {name!r}", kind="schedule-not-found")


def _refused(error: Exception) -> Response:
    field = getattr(error, "field", None)
    errors = None
    if field is not None:  # the field at fault, as the request names it
        loc = ["body", "type" if field == "job_type" else field]
        errors = [{"loc": loc, "msg": str(error), "type": "value_error"}]
    return problem(422, str(error), kind="schedule-invalid", errors=errors)


def _fields(body: BaseModel) -> dict[str, Any]:
    values = body.model_dump(exclude_unset=True)
    if "type" in values:
        values["job_type"] = values.pop("type")
    return {k: v for k, v in values.items() if v is not None or k == "payload"}


@router.get(
    "/schedules",
    response_model=list[ScheduleOut],
    summary="List the org's schedules",
    responses=problem_responses(401, 422, 500, 503),
)
def list_schedules(org: CurrentOrgDep, request: Request) -> Any:
    """The org's schedules by name, with their next tick and last job."""
    service = _service(request)
    if service is None:
        return _unavailable()
    return [ScheduleOut.of(s) for s in service.list_schedules(org)]


@router.post(
    "/schedules",
    status_code=201,
    response_model=ScheduleOut,
    summary="Create a schedule",
    responses=problem_responses(400, 401, 409, 413, 422, 500, 503),
)
def create_schedule(body: ScheduleIn, org: CurrentOrgDep, request: Request) -> Any:
    """A schedule enqueuing a job of a public type at each tick of ``cron`` in ``timezone``.
    Under the org's quotas: 409 (``quota-exceeded``, ``schedules``) when it holds its quota of
    schedules, 422 (``schedule_interval``) when ``cron`` ticks more often than it may."""
    service = _service(request)
    if service is None:
        return _unavailable()
    if not service.registry.is_public(body.type):
        return _refused(ValueError(f"unknown job type {body.type!r}"))
    try:
        schedule = schedule_from_fields(org, _fields(body))
        return ScheduleOut.of(
            service.create(
                schedule, quotas=quota_service(request), operator=org in operator_orgs(request)
            )
        )
    except ScheduleExists as error:
        return problem(409, str(error), kind="schedule-exists")
    except ScheduleInvalid as error:
        return _refused(error)


@router.get(
    "/schedules/{name}",
    response_model=ScheduleOut,
    summary="Read one schedule",
    responses=problem_responses(401, 404, 422, 500, 503),
)
def get_schedule(name: str, org: CurrentOrgDep, request: Request) -> Any:
    """The org's schedule; 404 if absent or another org's."""
    service = _service(request)
    if service is None:
        return _unavailable()
    try:
        return ScheduleOut.of(service.get(org, name))
    except ScheduleNotFound:
        return _not_found(name)


@router.patch(
    "/schedules/{name}",
    response_model=ScheduleOut,
    summary="Change a schedule",
    responses=problem_responses(400, 401, 404, 409, 413, 422, 500, 503),
)
def change_schedule(name: str, body: ScheduleChange, org: CurrentOrgDep, request: Request) -> Any:
    """Change the given fields; a schedule declared in code only pauses and resumes."""
    service = _service(request)
    if service is None:
        return _unavailable()
    fields = _fields(body)
    if "job_type" in fields and not service.registry.is_public(fields["job_type"]):
        return _refused(ValueError(f"unknown job type {fields['job_type']!r}"))
    try:
        return ScheduleOut.of(
            service.update(
                org,
                name,
                fields,
                quotas=quota_service(request),
                operator=org in operator_orgs(request),
            )
        )
    except ScheduleNotFound:
        return _not_found(name)
    except ScheduleExists as error:
        return problem(409, str(error), kind="schedule-exists")
    except ScheduleDeclared as error:
        return problem(409, str(error), kind="schedule-declared-in-code")
    except ScheduleInvalid as error:
        return _refused(error)


@router.delete(
    "/schedules/{name}",
    status_code=204,
    response_class=Response,
    summary="Delete a schedule",
    responses=problem_responses(401, 404, 409, 422, 500, 503),
)
def delete_schedule(name: str, org: CurrentOrgDep, request: Request) -> Response:
    """Delete a run-time schedule (one declared in code is paused instead: 409)."""
    service = _service(request)
    if service is None:
        return _unavailable()
    try:
        service.remove(org, name)
    except ScheduleNotFound:
        return _not_found(name)
    except ScheduleDeclared as error:
        return problem(409, str(error), kind="schedule-declared-in-code")
    return Response(status_code=204)


@router.post(
    "/schedules/{name}/{action}",
    response_model=ScheduleOut,
    summary="Pause, resume, or run a schedule now",
    responses=problem_responses(401, 404, 422, 429, 500, 503),
)
def act_on_schedule(
    name: str, action: Literal["pause", "resume", "run"], org: CurrentOrgDep, request: Request
) -> Any:
    """``pause``, ``resume`` (from the next tick after now) or ``run`` (enqueue one job now;
    ``last_job_id`` names it)."""
    service = _service(request)
    if service is None:
        return _unavailable()
    try:
        if action == "pause":
            return ScheduleOut.of(service.pause(org, name))
        if action == "resume":
            return ScheduleOut.of(service.resume(org, name))
        service.get(org, name)  # an absent schedule is a 404 before any quota
        admit(request, org)  # an enqueue of the org's (429 over its quotas)
        state, _ = service.run_now(org, name)
        return ScheduleOut.of(state)
    except ScheduleNotFound:
        return _not_found(name)


def _settings_store(request: Request) -> Any:
    container = _container(request)
    if container.config.store() != "postgres":
        return None
    from jobs_postgres.retention import PostgresSettingsStore

    return PostgresSettingsStore(container.engine())


@router.get(
    "/settings/retention",
    tags=["settings"],
    summary="Read the run-time retention settings",
    responses=problem_responses(401, 422, 500, 503),
)
def read_retention(org: CurrentOrgDep, request: Request) -> Any:
    """Purge on/off, the default policy, per-type overrides, batch size, purge schedule."""
    store = _settings_store(request)
    if store is None:
        return _unavailable()
    settings: RetentionSettings = store.load()
    return settings.to_dict()


@router.patch(
    "/settings/retention",
    tags=["settings"],
    summary="Change the run-time retention settings (operators only)",
    responses=problem_responses(400, 401, 403, 413, 422, 500, 503),
)
def change_retention(changes: dict[str, Any], org: CurrentOrgDep, request: Request) -> Any:
    """Merge ``changes`` into the settings. Only tokens of the orgs in ``JOBS_OPERATOR_ORGS``
    may: these settings decide what is deleted for every org."""
    if org not in operator_orgs(request):
        return problem(
            403,
            "only an operator may change retention settings: use a token of an org listed in "
            "JOBS_OPERATOR_ORGS, or `jobs settings set` on the server",
            kind="forbidden",
        )
    store = _settings_store(request)
    if store is None:
        return _unavailable()
    try:
        updated = store.load().merged(changes)
    except RetentionInvalid as error:
        return problem(422, str(error), kind="settings-invalid")
    store.save(updated, by=f"api:{org}")
    return updated.to_dict()
