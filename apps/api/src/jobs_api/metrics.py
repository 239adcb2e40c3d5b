"""``GET /metrics``: the Prometheus metrics of this API process and the live jobs' gauges
(``jobs_metrics``; docs/operations.md). Operators only: a token (or session) of an org listed in
``JOBS_OPERATOR_ORGS``; the counts cover every org, so a tenant is refused (403).

The gauges of the live jobs are read at scrape time, one grouped read of the live rows
(``OperatorReads.active_counts``); the counters and histograms were counted by the service's
observer as the API enqueued. Not in the OpenAPI document (it is not JSON): described in
docs/operations.md.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from jobs_metrics import exposition
from prometheus_client import CONTENT_TYPE_LATEST

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem
from jobs_api.quotas import operator_orgs

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(org: CurrentOrgDep, request: Request) -> Response:
    """The exposition in Prometheus' text format."""
    if org not in operator_orgs(request):
        return problem(
            403,
            "only an operator may read the metrics (they count every org's jobs): use a token "
            "of an org listed in JOBS_OPERATOR_ORGS",
            kind="forbidden",
        )
    container = request.app.state.container
    service = container.service()
    active = await run_in_threadpool(service.store.active_counts, service.clock.now())
    return Response(exposition(active), media_type=CONTENT_TYPE_LATEST)
