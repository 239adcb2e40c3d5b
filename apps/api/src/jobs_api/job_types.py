"""``GET /job-types``: the public job types, with what a UI needs to build menus and forms
(docs/events.md), and whether each is paused; ``POST /job-types/{name}/pause`` and ``/resume``:
an operator stops and restarts the claims of a type, for every org (docs/operations.md).

Pausing is global, so only a token (or session) of an org listed in ``JOBS_OPERATOR_ORGS`` may
pause or resume (403 for any other, before the name is even looked at: a tenant learns nothing
of the internal types); an operator may pause any registered type, internal ones included, and
resume any paused name (404 for a name that is neither).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from jobs_core import DedupScope, JobType
from jobs_core.pauses import TypePause
from pydantic import BaseModel, Field

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem, problem_responses
from jobs_api.quotas import operator_orgs

if TYPE_CHECKING:
    from jobs_api.containers import Container

ANY_OBJECT: dict[str, Any] = {"type": "object"}
"""The payload schema of a type that declares none: any JSON object."""


class JobTypeOut(BaseModel):
    """One public job type."""

    name: str
    description: str
    payload_schema: dict[str, Any] = Field(
        description='JSON Schema of the payload; `{"type": "object"}` when the type has none.'
    )
    dedup_scope: DedupScope
    max_attempts: int
    public: bool
    protected: bool = Field(
        description="Its jobs are domain history: never deleted (DELETE answers 409)."
    )
    applies_to: list[str] = Field(
        description="The kinds of thing the type acts on (for a UI's menus); empty: none."
    )
    paused_at: datetime | None = Field(
        default=None,
        description="When an operator paused the type (no worker takes its jobs); null: not.",
    )
    paused_by: str | None = Field(default=None, description="Who paused it (`api:<org>`...).")

    @classmethod
    def of(cls, job_type: JobType, pause: TypePause | None = None) -> JobTypeOut:
        """The representation of a registered type (and its pause, if it is paused)."""
        schema = job_type.payload_schema
        return cls(
            name=job_type.name,
            description=job_type.description,
            payload_schema=ANY_OBJECT if schema is None else schema.json_schema(),
            dedup_scope=job_type.dedup_scope,
            max_attempts=job_type.max_attempts,
            public=job_type.public,
            protected=job_type.protected,
            applies_to=list(job_type.applies_to),
            paused_at=pause.paused_at if pause else None,
            paused_by=pause.paused_by if pause else None,
        )


class PauseOut(BaseModel):
    """A type's pause state, as ``pause`` and ``resume`` leave it."""

    name: str
    paused: bool
    paused_at: datetime | None = None
    paused_by: str | None = None

    @classmethod
    def of(cls, name: str, pause: TypePause | None) -> PauseOut:
        """The state of ``name``: ``pause``, or not paused."""
        if pause is None:
            return cls(name=name, paused=False)
        return cls(name=name, paused=True, paused_at=pause.paused_at, paused_by=pause.paused_by)


class JobTypeList(BaseModel):
    """``GET /job-types``: the public types, sorted by name."""

    items: list[JobTypeOut]
    can_pause: bool = Field(
        default=False,
        description="Whether the caller may pause and resume types (an operator's token).",
    )
    paused: list[PauseOut] = Field(
        default_factory=list,
        description="Every paused type the caller may know of: the public ones, and to an "
        "operator the internal ones too.",
    )


router = APIRouter()


@router.get(
    "/job-types",
    response_model=JobTypeList,
    tags=["jobs"],
    summary="List the job types the org may enqueue",
    responses=problem_responses(401, 500),
)
async def list_job_types(org: CurrentOrgDep, request: Request) -> JobTypeList:
    """Every public type of the registry (internal types are never listed): name, description,
    payload JSON Schema, dedup scope, max attempts, whether its jobs are protected, the kinds
    of thing it applies to, and whether an operator paused it; ``can_pause`` says whether the
    caller is an operator."""
    container: Container = request.app.state.container
    service = container.service()
    registry = service.registry
    pauses = await run_in_threadpool(service.paused_types)
    operator = org in operator_orgs(request)
    return JobTypeList(
        items=[JobTypeOut.of(t, pauses.get(t.name)) for t in registry.public_types()],
        can_pause=operator,
        paused=[
            PauseOut.of(name, pause)
            for name, pause in sorted(pauses.items())
            if operator or registry.is_public(name)
        ],
    )


def _not_an_operator() -> Response:
    return problem(
        403,
        "only an operator may pause or resume a job type (a pause stops every org's jobs of "
        "the type): use a token of an org listed in JOBS_OPERATOR_ORGS, or `jobs pause` / "
        "`jobs resume` on the server",
        kind="forbidden",
    )


def _unknown(name: str) -> Response:
    return problem(
        404,
        f"no job type {name!r} is registered here (GET /job-types lists the public ones)",
        kind="unknown-job-type",
    )


@router.post(
    "/job-types/{name}/pause",
    response_model=PauseOut,
    tags=["jobs"],
    summary="Pause a job type for every org (operators only)",
    responses=problem_responses(401, 403, 404, 500, 503),
)
async def pause_job_type(name: str, org: CurrentOrgDep, request: Request) -> Any:
    """No worker claims the type's jobs from now on: its queued jobs stay queued, running ones
    run to their end. Pausing a paused type keeps the first pause."""
    if org not in operator_orgs(request):
        return _not_an_operator()
    service = request.app.state.container.service()
    if name not in service.registry:
        return _unknown(name)
    pause = await run_in_threadpool(service.pause_type, name, f"api:{org}")
    return PauseOut.of(name, pause)


@router.post(
    "/job-types/{name}/resume",
    response_model=PauseOut,
    tags=["jobs"],
    summary="Resume a paused job type (operators only)",
    responses=problem_responses(401, 403, 404, 500, 503),
)
async def resume_job_type(name: str, org: CurrentOrgDep, request: Request) -> Any:
    """The type's due jobs are claimable again; idle workers are woken at once. Resuming a type
    that is not paused changes nothing."""
    if org not in operator_orgs(request):
        return _not_an_operator()
    service = request.app.state.container.service()
    resumed = await run_in_threadpool(service.resume_type, name)
    if not resumed and name not in service.registry:
        return _unknown(name)
    return PauseOut.of(name, None)
