"""``/quotas`` (the org's quotas and its use of them) and ``/settings/quotas`` (the operators'
overrides), issue 23; the quotas themselves are ``jobs_core.quotas`` (decision 0033).

Any token reads its own org's quotas. Only a token of an org listed in ``JOBS_OPERATOR_ORGS``
reads every override and changes one org's (403 otherwise), as for the retention settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from jobs_core.quota_service import QuotaService
from jobs_core.quotas import QuotaOverride

from jobs_api.auth import CurrentOrgDep
from jobs_api.problems import problem, problem_responses

if TYPE_CHECKING:
    from jobs_api.containers import Container

router = APIRouter(tags=["quotas"])


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


def quota_service(request: Request) -> QuotaService:
    """The app's :class:`QuotaService` (what ``POST /jobs`` admits enqueues through)."""
    return _container(request).quotas()


def admit(request: Request, org: str) -> None:
    """Admit one enqueue of ``org``, or raise ``QuotaExceeded`` (answered 429 with
    ``Retry-After`` by :mod:`jobs_api.problems`)."""
    quota_service(request).admit(org)


def operator_orgs(request: Request) -> set[str]:
    """The orgs of ``JOBS_OPERATOR_ORGS``: their tokens act as operators over HTTP."""
    raw = str(_container(request).config.operator_orgs())
    return {org.strip() for org in raw.split(",") if org.strip()}


def _forbidden() -> Response:
    return problem(
        403,
        "only an operator may read or change quotas of other orgs: use a token of an org "
        "listed in JOBS_OPERATOR_ORGS, or `jobs quotas` on the server",
        kind="forbidden",
    )


def _override_json(override: QuotaOverride) -> dict[str, Any]:
    return {
        "org": override.org_id,
        **override.limits(),
        "updated_at": override.updated_at,
        "updated_by": override.updated_by,
    }


@router.get(
    "/quotas",
    summary="Read the org's quotas and its use of them",
    responses=problem_responses(401, 500, 503),
)
async def read_own_quotas(org: CurrentOrgDep, request: Request) -> Any:
    """The org's quotas (``max_queued``, ``enqueue_rate``...), how many queued jobs and
    schedules it holds, and the quotas it is near (80 % or more)."""
    service = quota_service(request)
    report = await run_in_threadpool(service.of, org)
    return {**report.to_dict(), "enforced": service.enabled}


@router.get(
    "/settings/quotas",
    tags=["settings"],
    summary="Read the default quotas and every override (operators only)",
    responses=problem_responses(401, 403, 500, 503),
)
async def read_quota_settings(org: CurrentOrgDep, request: Request) -> Any:
    """The defaults of this deployable and the orgs whose quotas an operator changed."""
    if org not in operator_orgs(request):
        return _forbidden()
    service = quota_service(request)
    overrides = await run_in_threadpool(service.store.overrides)
    return {
        "enforced": service.enabled,
        "defaults": service.defaults.to_dict(),
        "overrides": [_override_json(o) for o in overrides],
    }


@router.put(
    "/settings/quotas/{org_id}",
    tags=["settings"],
    summary="Change one org's quotas (operators only)",
    responses=problem_responses(400, 401, 403, 413, 422, 500, 503),
)
async def change_quotas(
    org_id: str, changes: dict[str, Any], org: CurrentOrgDep, request: Request
) -> Any:
    """Set some of the org's quotas (``{"max_queued": 50000}``); ``null`` gives a quota back
    its default. The API processes apply it within ``JOBS_QUOTA_REFRESH_S``."""
    if org not in operator_orgs(request):
        return _forbidden()
    service = quota_service(request)
    try:
        await run_in_threadpool(service.set_override, org_id, changes, f"api:{org}")
    except ValueError as error:
        return problem(422, str(error), kind="quotas-invalid")
    return (await run_in_threadpool(service.of, org_id)).to_dict()


@router.delete(
    "/settings/quotas/{org_id}",
    tags=["settings"],
    status_code=204,
    response_class=Response,
    summary="Give one org the default quotas again (operators only)",
    responses=problem_responses(401, 403, 500, 503),
)
async def reset_quotas(org_id: str, org: CurrentOrgDep, request: Request) -> Response:
    """Remove the org's override (nothing to remove is not an error)."""
    if org not in operator_orgs(request):
        return _forbidden()
    await run_in_threadpool(quota_service(request).clear_override, org_id)
    return Response(status_code=204)
