"""The endpoints: each parses the request, calls one ``JobService`` use case, and shapes the
answer. Domain errors propagate to the handlers of :mod:`jobs_api.problems`, which map them to
HTTP in one place."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from jobs_core import JobFilter, JobNotFound, JobService, Status

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem, problem_responses
from jobs_api.quotas import admit
from jobs_api.reads import Reads
from jobs_api.schemas import (
    EnqueueIn,
    Health,
    InvalidCursor,
    JobOut,
    JobPage,
    JobStats,
    ListParams,
    decode_cursor,
    encode_cursor,
)

if TYPE_CHECKING:
    from jobs_api.containers import Container

log = logging.getLogger("jobs.api")

HEALTH_PROBE_ORG = "-healthz-"
"""An org no token can hold (tokens are issued for trimmed, non-empty org ids by the CLI, and
this one is only read): the health check counts its jobs to prove the store answers."""


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


async def _service(request: Request) -> JobService:
    # async: a singleton lookup needs no thread; a sync dependency costs a thread hand-off.
    return _container(request).service()


ServiceDep = Annotated[JobService, Depends(_service)]


async def _reads(request: Request) -> Reads:
    reads: Reads = _container(request).reads()
    return reads


ReadsDep = Annotated[Reads, Depends(_reads)]
"""Where the org's reads go (``reads.service(org)``: the primary, or a standby that has replayed
the org's own writes); a write route calls ``reads.wrote(org)`` after its write."""

JobIdPath = Annotated[str, Path(description="The job's id (a UUID).")]


def _job_id(raw: str) -> uuid.UUID:
    # A malformed id names no job: the same 404 as an absent or foreign one.
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise JobNotFound() from None


router = APIRouter()

WAITS_OR_QUEUED = frozenset({Status.WAITING, Status.QUEUED})
"""The statuses a job read alone says why it waits in."""


@router.get(
    "/healthz",
    response_model=Health,
    tags=["health"],
    summary="Is the API up and its job store reachable?",
    responses=problem_responses(503),
)
def healthz(request: Request) -> Any:
    """200 when the job store answers a query, else 503."""
    try:
        _container(request).service().stats(HEALTH_PROBE_ORG)
    except Exception as error:
        log.warning("health check failed: %s", error)
        return problem(503, "the job store is unreachable", kind="store-unavailable")
    return Health()


@router.post(
    "/jobs",
    status_code=202,
    response_model=JobOut,
    tags=["jobs"],
    summary="Enqueue a job of a public type",
    responses={
        202: {
            "description": "A new job was enqueued; `Location` is its URL.",
            "headers": {
                "Location": {"description": "The job's URL.", "schema": {"type": "string"}}
            },
        },
        200: {
            "model": JobOut,
            "description": "Deduplicated: a job of the org holds `dedup_key`; that job.",
        },
        **problem_responses(400, 401, 409, 413, 422, 429, 500, 503),
    },
)
def enqueue(
    body: EnqueueIn,
    org: CurrentOrgDep,
    service: ServiceDep,
    request: Request,
    response: Response,
) -> JobOut:
    """Enqueue a job; the row exists when this returns, so the client may poll it at once.
    An org over its quota of queued jobs or its enqueue rate gets 429 with ``Retry-After``.
    With ``depends_on`` it waits for those jobs (422 naming the ids that are not the org's)."""
    service.registry.public_type(body.type)  # an internal type answers as an unknown one
    admit(request, org)
    if body.depends_on is not None:  # waits for them (decision 0041); never deduplicated
        job = service.enqueue_after(
            org,
            body.type,
            body.payload,
            body.depends_on,
            dedup_key=body.dedup_key,
            priority=body.priority,
        )
        created = True
    else:
        enqueued = service.enqueue(
            org, body.type, body.payload, dedup_key=body.dedup_key, priority=body.priority
        )
        job, created = enqueued.job, enqueued.created
    _container(request).reads().wrote(org)
    if created:
        response.headers["Location"] = request.scope.get("root_path", "") + str(
            request.app.url_path_for("get_job", job_id=str(job.id))
        )
    else:
        response.status_code = 200
    return JobOut.of(job)


@router.get(
    "/jobs",
    response_model=JobPage,
    tags=["jobs"],
    summary="List the org's jobs, newest first",
    responses=problem_responses(401, 422, 500, 503),
)
def list_jobs(
    org: CurrentOrgDep,
    reads: ReadsDep,
    params: Annotated[ListParams, Query()],
    request: Request,
) -> JobPage:
    """One page of the org's jobs; ``next_cursor`` is null on the last page. A payload,
    progress or report larger than ``JOBS_LIST_FIELD_BYTES`` (its JSON) is null and named in
    the job's ``truncated``; ``GET /jobs/{id}`` has it. With ``parent_id``, only that job's
    children; each job that has children says how many and how many ended (``children``)."""
    before = None
    if params.cursor is not None:
        try:
            before = decode_cursor(params.cursor)
        except InvalidCursor as error:
            raise RequestValidationError(
                [{"loc": ("query", "cursor"), "msg": str(error), "type": "value_error"}]
            ) from None
    limit = params.limit
    query = JobFilter(
        statuses=None if params.status is None else params.status.statuses(),
        type=params.type,
        parent_id=params.parent_id,
        limit=limit + 1,  # one more tells whether a next page exists
        before=before,
        # Large values stay in the store: a page is at most limit x 3 x this, whatever the jobs.
        field_bytes=int(_container(request).config.list_field_bytes()),
    )
    service = reads.service(org)
    jobs = service.list_jobs(org, query)
    page, more = jobs[:limit], len(jobs) > limit
    children = service.children_counts(org, [job.id for job in page])  # one read per page
    return JobPage(
        items=[JobOut.of(job, children=children.get(job.id)) for job in page],
        next_cursor=encode_cursor(page[-1]) if more else None,
    )


@router.get(
    "/jobs/stats",
    response_model=JobStats,
    tags=["jobs"],
    summary="Count the org's jobs per status",
    responses=problem_responses(401, 500, 503),
)
def stats(org: CurrentOrgDep, reads: ReadsDep) -> JobStats:
    """Counts per status, and ``active`` = queued + running."""
    return JobStats.of(reads.service(org).stats(org))


@router.get(
    "/jobs/{job_id}",
    name="get_job",
    response_model=JobOut,
    tags=["jobs"],
    summary="Read one job",
    responses=problem_responses(401, 404, 422, 500, 503),
)
def get_job(job_id: JobIdPath, org: CurrentOrgDep, reads: ReadsDep) -> Response:
    """The job, if it is the org's, with every ended attempt (``attempt_history``); 404 (the
    same body) if it is absent or another org's."""
    # The route clients poll: answered as JSON bytes here, on the route's thread. Returned as
    # a model, FastAPI would validate it again (JobOut.of already did) in a second hand-off
    # to the thread pool before serializing it on the event loop (bench/NOTES.md §5).
    service = reads.service(org)
    found = service.get(org, _job_id(job_id))
    waiting = service.why_waiting(found) if found.status in WAITS_OR_QUEUED else None
    history = service.attempts(org, found.id)
    children = service.children_counts(org, [found.id]).get(found.id)
    job = JobOut.of(found, waiting, history, children)
    return Response(job.model_dump_json(), media_type="application/json")


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobOut,
    tags=["jobs"],
    summary="Cancel a job",
    responses=problem_responses(401, 404, 409, 422, 500, 503),
)
def cancel_job(
    job_id: JobIdPath, org: CurrentOrgDep, service: ServiceDep, reads: ReadsDep
) -> JobOut:
    """A queued job is cancelled at once; a running one is asked to stop
    (``cancel_requested_at``); a finished one is a 409."""
    cancelled = service.cancel(org, _job_id(job_id))
    reads.wrote(org)
    return JobOut.of(cancelled)


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    tags=["jobs"],
    summary="Queue a failed or cancelled job again",
    responses=problem_responses(401, 404, 409, 422, 429, 500, 503),
)
def retry_job(
    job_id: JobIdPath, org: CurrentOrgDep, service: ServiceDep, reads: ReadsDep, request: Request
) -> JobOut:
    """Failed or cancelled → queued with a fresh attempt budget; 409 for another status, or
    when another job holds its dedup key now; 429 over the org's quotas (as an enqueue)."""
    found = _job_id(job_id)
    service.get(org, found)  # a foreign or absent job is a 404 before any quota
    admit(request, org)
    retried = service.retry(org, found)
    reads.wrote(org)
    return JobOut.of(retried)


@router.delete(
    "/jobs/{job_id}",
    status_code=204,
    response_class=Response,
    tags=["jobs"],
    summary="Delete a finished job",
    responses=problem_responses(401, 404, 409, 422, 500, 503),
)
def delete_job(
    job_id: JobIdPath, org: CurrentOrgDep, service: ServiceDep, reads: ReadsDep
) -> Response:
    """Delete a finished job; 409 for a queued or running job, or one of a protected type
    (domain history, never deleted)."""
    service.delete(org, _job_id(job_id))
    reads.wrote(org)
    return Response(status_code=204)
