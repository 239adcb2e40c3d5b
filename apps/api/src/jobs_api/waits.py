"""Jobs that wait for others over HTTP (decision 0041, docs/flows.md): ``POST /batches`` (members
and a callback that runs once they have all ended) and ``GET /jobs/{id}/awaited`` (what a job
waits, or waited, for). A dependency of one job is ``depends_on`` of ``POST /jobs``."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from jobs_core import Status
from jobs_core.domain import PRIORITY_MAX, PRIORITY_MIN
from jobs_core.waits import MAX_BATCH
from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem_responses
from jobs_api.quotas import quota_service
from jobs_api.routes import JobIdPath, ServiceDep, _job_id
from jobs_api.schemas import JobOut

router = APIRouter(tags=["jobs"])


class BatchJobIn(BaseModel):
    """One job of a batch: a public type and its payload."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=100, examples=["noop"])
    payload: dict[str, Any] = Field(
        default_factory=dict, description="Validated by the job type's schema."
    )


class BatchIn(BaseModel):
    """``POST /batches``: the members, and the callback that runs once they have all ended."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[BatchJobIn] = Field(
        min_length=1, max_length=MAX_BATCH, description=f"The members (1 to {MAX_BATCH})."
    )
    callback: BatchJobIn = Field(
        description=(
            "Runs once, after every member has ended (whatever their ends); its handler reads "
            "them with `ctx.awaited()`."
        )
    )
    priority: int = Field(
        default=0, ge=PRIORITY_MIN, le=PRIORITY_MAX, description="Of every job of the batch."
    )

    @field_validator("priority", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: object) -> object:
        # JSON's true is not the number 1 (pydantic would take it as 1).
        if isinstance(value, bool):
            raise ValueError("priority must be an integer, not a boolean")
        return value


class BatchOut(BaseModel):
    """The batch as enqueued: its callback (status ``waiting``) and its members' ids."""

    callback: JobOut
    members: list[uuid.UUID]


class AwaitedJobOut(BaseModel):
    """One job another waits for."""

    id: uuid.UUID
    type: str
    status: Status


class AwaitedOut(BaseModel):
    """What a job waits (or waited) for: the jobs in the order given, and counts per status
    (``total``, ``ended`` and one per status)."""

    jobs: list[AwaitedJobOut]
    total: int
    ended: int
    counts: dict[str, int]


@router.post(
    "/batches",
    status_code=201,
    response_model=BatchOut,
    summary="Enqueue a batch of jobs and a callback that runs once they have all ended",
    responses=problem_responses(400, 401, 413, 422, 429, 500, 503),
)
def enqueue_batch(
    body: BatchIn, org: CurrentOrgDep, service: ServiceDep, request: Request
) -> BatchOut:
    """The members and the callback are written together, or nothing is (an unknown or
    internal type, a bad payload: 422 naming it). The batch counts as its members and its
    callback against the org's quotas (429 with ``Retry-After``)."""
    for job in (*body.jobs, body.callback):
        service.registry.public_type(job.type)  # an internal type answers as an unknown one
    quota_service(request).admit(org, len(body.jobs) + 1)
    batch = service.enqueue_batch(
        org,
        [(job.type, job.payload) for job in body.jobs],
        (body.callback.type, body.callback.payload),
        priority=body.priority,
    )
    return BatchOut(
        callback=JobOut.of(batch.callback), members=[member.id for member in batch.members]
    )


@router.get(
    "/jobs/{job_id}/awaited",
    response_model=AwaitedOut,
    summary="The jobs a job waits (or waited) for, and how they ended",
    responses=problem_responses(401, 404, 422, 500, 503),
)
def get_awaited(job_id: JobIdPath, org: CurrentOrgDep, service: ServiceDep) -> AwaitedOut:
    """Its dependencies, or a batch callback's members, in the order given: a batch's
    progress is ``ended`` of ``total``. Empty for a job that awaits none; 404 if it is not
    the org's."""
    summary = service.awaited(org, _job_id(job_id))
    return AwaitedOut(
        jobs=[AwaitedJobOut(id=job.id, type=job.type, status=job.status) for job in summary.jobs],
        total=len(summary.jobs),
        ended=summary.ended,
        counts={status.value: n for status, n in summary.counts.items()},
    )
