"""Errors as problem documents (RFC 9457): every error response of the API has this shape.

Domain errors of ``jobs_core`` are mapped to HTTP here, in one place, so that the same error
always gets the same status and body (an absent job and another org's job share one 404 body).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from jobs_core import (
    DedupConflict,
    DedupKeyOwned,
    DependencyInvalid,
    InvalidTransition,
    JobNotFound,
    PayloadInvalid,
    StoreRefused,
    StoreUnavailable,
    UnknownJobType,
)
from jobs_core.quotas import Quota, QuotaExceeded
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

log = logging.getLogger("jobs.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
JOB_NOT_FOUND_DETAIL = "no such job"
UNAUTHENTICATED_DETAIL = "a valid bearer token is required"
"""The one message of every 401: missing, malformed, unknown and revoked tokens look the same."""


class FieldError(BaseModel):
    """One rejected field of a request."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """An error response (RFC 9457). ``type`` names the kind of problem; ``errors`` lists the
    rejected fields of a 422."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["urn:jobs:problem:job-not-found"])
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None


class ProblemResponse(JSONResponse):
    """A JSON response with the problem media type."""

    media_type = PROBLEM_MEDIA_TYPE


def problem(
    status: int,
    detail: str,
    *,
    kind: str | None = None,
    errors: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
    members: Mapping[str, Any] | None = None,
) -> ProblemResponse:
    """A problem response; ``kind`` becomes ``urn:jobs:problem:<kind>`` (else ``about:blank``,
    whose title is the HTTP reason phrase); ``members`` are extension members (RFC 9457 §3.2,
    e.g. the ``quota`` a 429 names)."""
    body: dict[str, Any] = {
        "type": f"urn:jobs:problem:{kind}" if kind else "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": clipped(detail, DETAIL_MAX_CHARS),
    }
    if errors is not None:
        body["errors"] = [_field_error(e) for e in errors]
    body.update(members or {})
    return ProblemResponse(body, status_code=status, headers=dict(headers or {}))


def _field_error(error: Mapping[str, Any]) -> dict[str, Any]:
    # Never the rejected value itself (pydantic's "input"), and no field name or message long
    # enough to echo one: a 10 KB key or a message quoting a value is cut.
    loc = error.get("loc", [])
    return {
        "loc": [
            part if isinstance(part, int) else clipped(str(part), LOC_MAX_CHARS) for part in loc
        ],
        "msg": clipped(str(error.get("msg", "invalid")), MSG_MAX_CHARS),
        "type": clipped(str(error.get("type", "value_error")), LOC_MAX_CHARS),
    }


DETAIL_MAX_CHARS = 1000
MSG_MAX_CHARS = 500
LOC_MAX_CHARS = 100
"""The most characters of a problem's ``detail``, of an error's ``msg``, and of a field name in
its ``loc``: past them the text is cut and says how long it was (docs/http.md)."""


def clipped(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries documenting problem bodies for ``statuses``."""
    return {
        status: {
            "description": _DESCRIPTIONS.get(status, HTTPStatus(status).phrase),
            "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {}},
        }
        for status in statuses
    }


_DESCRIPTIONS = {
    400: "The request body could not be decoded (not UTF-8 JSON text).",
    401: "Missing, malformed, unknown or revoked bearer token (always the same body).",
    404: "No such job: absent or another org's (always the same body).",
    409: "The job's state forbids this action, or its dedup key is held by another job.",
    413: "The request body is larger than the configured limit.",
    422: "The request is invalid; `errors` lists the rejected fields.",
    429: "Over a quota (`quota` names it: `queued_jobs` or `enqueue_rate`) or a cap (the "
    "detail names its setting, e.g. open event streams); retry after `Retry-After` seconds.",
    503: "The job store cannot be reached; retry later.",
}


# ---- handlers ---------------------------------------------------------------------------------


def _http_error(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404 and detail == HTTPStatus.NOT_FOUND.phrase:
        detail = f"no route for {_shown_path(request)}"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        detail = f"{request.method} is not allowed on {_shown_path(request)}"
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return problem(
        exc.status_code, detail, kind=getattr(exc, "problem_kind", None), headers=headers
    )


SHOWN_PATH_CHARS = 200
"""The most characters of a request's path an error message quotes (never a whole long one)."""


def _shown_path(request: Request) -> str:
    return clipped(request.url.path, SHOWN_PATH_CHARS)


def _allowed_methods(request: Request) -> list[str]:
    # Starlette's 405 names the methods of the first route matching the path only; each method
    # of a path is its own route here, so Allow would miss some of them. Ask the routing.
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.routes
        )
    ]


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _validation_error(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, RequestValidationError)
    errors = jsonable_encoder(exc.errors())
    return problem(422, "the request is invalid", kind="invalid-request", errors=errors)


def _job_not_found(request: Request, exc: Exception) -> ProblemResponse:
    # Never exc's message: the body must not depend on why the job was not found.
    return problem(404, JOB_NOT_FOUND_DETAIL, kind="job-not-found")


def _invalid_transition(request: Request, exc: Exception) -> ProblemResponse:
    return problem(409, str(exc), kind="invalid-transition")


def _dedup_conflict(request: Request, exc: Exception) -> ProblemResponse:
    return problem(409, str(exc), kind="dedup-conflict")


def _dependency_invalid(request: Request, exc: Exception) -> ProblemResponse:
    # ``missing``: the ids the client sent that name no job of its org (another org's job is
    # answered as an absent one), at most MAX_DEPENDENCIES of them.
    assert isinstance(exc, DependencyInvalid)
    where = ["body", "depends_on"] if "depends_on" in _body_fields(request) else ["body", "jobs"]
    error = {"loc": where, "msg": str(exc), "type": "dependency_invalid"}
    members = {"missing": [str(job_id) for job_id in exc.missing]} if exc.missing else None
    return problem(422, str(exc), kind="dependency-invalid", errors=[error], members=members)


def _payload_invalid(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, PayloadInvalid)
    errors = [
        {**dict(error), "loc": payload_location(request, exc, list(error.get("loc", [])))}
        for error in exc.errors
    ]
    return problem(422, str(exc), kind="payload-invalid", errors=errors)


def payload_location(request: Request, exc: PayloadInvalid, loc: list[Any]) -> list[Any]:
    """Where a payload error is in the request (docs/api.md, "Errors"): a type-owned dedup key
    refuses the body's ``dedup_key``; a route whose body has a ``payload`` field (``POST /jobs``,
    the schedules) has it under ``["body", "payload"]``; a module's route that built the payload
    from its body's fields has it at that field (``["body", field]``); otherwise the location is
    the payload's own, under ``["payload"]`` (a payload the route built from elsewhere)."""
    if isinstance(exc, DedupKeyOwned):
        return ["body", *loc]
    fields = _body_fields(request)
    if "payload" in fields:
        return ["body", "payload", *loc]
    if loc and loc[0] in fields:
        return ["body", *loc]
    return ["payload", *loc]


def _body_fields(request: Request) -> set[str]:
    """The fields of the JSON body model of the route that answered (none if it has none)."""
    body = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(body, "field_info", None), "annotation", None)
    fields = getattr(model, "model_fields", None)
    return set(fields) if isinstance(fields, dict) else set()


def _unknown_job_type(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, UnknownJobType)
    return problem(
        422,
        str(exc),
        kind="unknown-job-type",
        errors=[{"loc": ["body", "type"], "msg": str(exc), "type": "unknown_job_type"}],
    )


QUOTA_STATUS = {
    Quota.QUEUED_JOBS: 429,
    Quota.ENQUEUE_RATE: 429,
    Quota.SCHEDULES: 409,
    Quota.SCHEDULE_INTERVAL: 422,
}
"""How each quota refuses: an enqueue 429 (waiting helps), a schedule too many 409 (the org's
state forbids it), a schedule too frequent 422 (its ``cron`` is what is refused)."""


def _quota_exceeded(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, QuotaExceeded)
    status = QUOTA_STATUS[exc.quota]
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(exc.retry_after_s)
    errors = None
    if exc.quota is Quota.SCHEDULE_INTERVAL:
        errors = [{"loc": ["body", "cron"], "msg": str(exc), "type": "quota_exceeded"}]
    members: dict[str, Any] = {"quota": exc.quota.value, "limit": exc.limit}
    if exc.used is not None:
        members["used"] = exc.used
    return problem(
        status, str(exc), kind="quota-exceeded", errors=errors, headers=headers, members=members
    )


def _store_unavailable(request: Request, exc: Exception) -> ProblemResponse:
    log.warning("job store unavailable: %s", exc)
    return problem(
        503,
        "the job store is unavailable; retry later",
        kind="store-unavailable",
        headers={"Retry-After": "1"},
    )


def _store_refused(request: Request, exc: Exception) -> ProblemResponse:
    # A value the database refuses (SQLSTATE class 22: malformed or out of range; class 54: a
    # program limit, i.e. too large): permanent, so never a 503 inviting a retry.
    assert isinstance(exc, StoreRefused)
    log.info("store refused a value of %s %s: %s", request.method, request.url.path, exc)
    too_large = (exc.sqlstate or "").startswith("54")
    what = "is too large to store" if too_large else "is malformed or out of range"
    return problem(
        413 if too_large else 422,
        f"a value of the request {what} (SQLSTATE {exc.sqlstate or 'unknown'}); "
        "correct or shorten it: retrying will fail the same way",
        kind="store-refused",
    )


def _unexpected(request: Request, exc: Exception) -> ProblemResponse:
    # Logged with its traceback, answered without it: internals never reach a client.
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem(500, "an unexpected error occurred", kind="internal-error")


def unexpected_error(scope: Scope, exc: Exception) -> ProblemResponse:
    """The 500 problem of an unexpected error, logged (``jobs_api.guard.KeepConnectionOnError``)."""
    return _unexpected(Request(scope), exc)


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` with a problem document."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(JobNotFound, _job_not_found)
    app.add_exception_handler(InvalidTransition, _invalid_transition)
    app.add_exception_handler(DedupConflict, _dedup_conflict)
    app.add_exception_handler(DependencyInvalid, _dependency_invalid)
    app.add_exception_handler(PayloadInvalid, _payload_invalid)
    app.add_exception_handler(UnknownJobType, _unknown_job_type)
    app.add_exception_handler(StoreUnavailable, _store_unavailable)
    app.add_exception_handler(StoreRefused, _store_refused)
    app.add_exception_handler(QuotaExceeded, _quota_exceeded)
    app.add_exception_handler(Exception, _unexpected)
