"""The Overview's routes (issue 24, item 4; docs/panel.md, "Overview"): ``GET /overview`` (the
org's jobs per type with their series over the last hour or day, the live workers for an
operator, the org's usage), ``GET /jobs/lookup`` (a job by its id, a prefix, or the panel's short
id) and ``POST /jobs/bulk`` (retry, cancel or delete many jobs, or count them first).

Every read of the view goes through :func:`overview_reads`, the one dependency that names the
store they read (``Container.overview_reads``): a deployment may point it at a read replica
without touching a route. The bulk action writes through the service, one job at a time
(:mod:`jobs_core.bulk`). No route shows or touches another org's job: a foreign id is skipped or
not found exactly as an absent one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from jobs_core import JobNotFound, JobService
from jobs_core.bulk import Selection, run_bulk
from jobs_core.overview import LOOKUP_CANDIDATES
from jobs_core.overview_reads import OverviewReads

from jobs_api.auth import CurrentOrgDep
from jobs_api.overview_schemas import (
    BulkIn,
    BulkOut,
    Candidate,
    OverviewOut,
    OverviewParams,
    overview_of,
)
from jobs_api.problems import problem, problem_responses
from jobs_api.quotas import admit, operator_orgs, quota_service
from jobs_api.schemas import JobOut

if TYPE_CHECKING:
    from jobs_api.containers import Container

router = APIRouter(tags=["overview"])


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


async def overview_reads(request: Request, org: CurrentOrgDep) -> OverviewReads:
    """The one source of the Overview's reads (the container's ``overview_reads``), over the
    store the org's reads go to (:mod:`jobs_api.reads`: the standby of
    ``JOBS_READ_DATABASE_URL``, or the primary until the standby has replayed the org's own
    writes); the live workers are always read on the primary."""
    container = _container(request)
    reads = container.overview_reads()
    store = container.reads().service(org).store
    return reads if store is reads.store else reads.on(store)


async def _service(request: Request) -> JobService:
    return _container(request).service()


ReadsDep = Annotated[OverviewReads, Depends(overview_reads)]
ServiceDep = Annotated[JobService, Depends(_service)]


@router.get(
    "/overview",
    response_model=OverviewOut,
    summary="The org's jobs per type: counts, throughput, waits and run times",
    responses=problem_responses(401, 422, 500, 503),
)
def read_overview(
    org: CurrentOrgDep,
    reads: ReadsDep,
    params: Annotated[OverviewParams, Query()],
    request: Request,
) -> OverviewOut:
    """Per type, the org's jobs by status (following ``status`` and ``type``, as ``GET /jobs``)
    and, per bucket of the window, the jobs that finished with the p50/p95 of their wait and
    of their attempts' run time; the live workers with their slots and types (null unless the
    token is an operator's); the org's quotas and usage."""
    statuses = None if params.status is None else params.status.statuses()
    counts = reads.type_counts(org, statuses, params.type)
    series = reads.series(org, params.window)
    workers = reads.workers() if org in operator_orgs(request) else None
    quotas = quota_service(request)
    usage = {**quotas.of(org).to_dict(), "enforced": quotas.enabled}
    return overview_of(
        params.window, counts, series, workers=workers, usage=usage, type_name=params.type
    )


@router.get(
    "/jobs/lookup",
    response_model=JobOut,
    tags=["jobs"],
    summary="Find a job by its id, a prefix of it, or the panel's short id",
    responses={
        404: problem_responses(404)[404],
        409: {
            **problem_responses(409)[409],
            "description": "More than one job matches: `candidates` lists up to "
            f"{LOOKUP_CANDIDATES} of them (id, type, status, created_at).",
        },
        **problem_responses(401, 422, 500, 503),
    },
)
def lookup_job(
    org: CurrentOrgDep,
    reads: ReadsDep,
    id: Annotated[
        str,
        Query(
            max_length=64,
            description="A full id, the 8 characters the panel shows (its last 8), or at "
            "least 8 of its first hex digits.",
        ),
    ],
) -> Any:
    """The org's one job the text names; 404 when none does (another org's included), 409
    listing the candidates when several do, 422 for a text that is no id."""
    try:
        found = reads.lookup(org, id)
    except ValueError as error:
        raise RequestValidationError(
            [{"loc": ("query", "id"), "msg": str(error), "type": "value_error"}]
        ) from None
    if not found.jobs:
        raise JobNotFound()
    if len(found.jobs) > 1:
        shown = len(found.jobs)
        return problem(
            409,
            f"{'more than ' if found.more else ''}{shown} jobs match {id.strip()!r}: send more "
            "of the id",
            kind="ambiguous-id",
            members={
                "candidates": [Candidate.of(j).model_dump(mode="json") for j in found.jobs],
                "more": found.more,
            },
        )
    return Response(JobOut.of(found.jobs[0]).model_dump_json(), media_type="application/json")


@router.post(
    "/jobs/bulk",
    response_model=BulkOut,
    tags=["jobs"],
    summary="Retry, cancel or delete many jobs (or count them first)",
    responses=problem_responses(400, 401, 413, 422, 500, 503),
)
def bulk(body: BulkIn, org: CurrentOrgDep, service: ServiceDep, request: Request) -> BulkOut:
    """The action on each job named by ``ids``, or on the org's jobs matching the filter
    (newest first, at most ``limit``), each as its single-job route would do it (a retry is
    admitted under the org's quotas as an enqueue). A job the action does not apply to, and an
    id that names no job of the org, is skipped with why; ``dry_run`` reports the same without
    changing anything."""
    if body.ids is not None:
        selection = Selection(ids=tuple(body.ids))
    else:
        statuses = None if body.status is None else body.status.statuses()
        selection = Selection(statuses=statuses, type=body.type, limit=body.limit)
    report = run_bulk(
        service,
        org,
        body.action,
        selection,
        dry_run=body.dry_run,
        admit=lambda: admit(request, org),
    )
    if not body.dry_run:
        _container(request).reads().wrote(org)  # the org reads its own writes (jobs_api.reads)
    return BulkOut.of(report)
