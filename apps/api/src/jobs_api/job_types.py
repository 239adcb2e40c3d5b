"""``GET /job-types``: the public job types, with what a UI needs to build menus and forms
(docs/events.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from jobs_core import DedupScope, JobType
from pydantic import BaseModel, Field

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem_responses

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

    @classmethod
    def of(cls, job_type: JobType) -> JobTypeOut:
        """The representation of a registered type."""
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
        )


class JobTypeList(BaseModel):
    """``GET /job-types``: the public types, sorted by name."""

    items: list[JobTypeOut]


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
    payload JSON Schema, dedup scope, max attempts, whether its jobs are protected and the kinds
    of thing it applies to."""
    container: Container = request.app.state.container
    registry = container.service().registry
    return JobTypeList(items=[JobTypeOut.of(t) for t in registry.public_types()])
