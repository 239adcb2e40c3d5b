"""The HTTP side of API tokens: the dependencies that resolve a request to ``CurrentOrg``.

Tokens themselves (their shape, hashing, the stores, issue and revoke, the cache) are the
credential component of jobs-core (``jobs_tokens``), which the CLI uses as well. Here the
routes depend on :data:`CurrentOrgDep`, which asks the container's token store through its
:class:`~jobs_tokens.TokenCache`: a token found live is trusted for
``JOBS_API_TOKEN_CACHE_S`` seconds, so a revocation takes effect within that time (decision
0005). Without an ``Authorization`` header, the session cookie is asked (``jobs_api.sessions``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jobs_tokens import TokenCache, hash_token, is_well_formed
from starlette.concurrency import run_in_threadpool

from jobs_api.problems import UNAUTHENTICATED_DETAIL
from jobs_api.sessions import session_cookie, session_org, session_org_blocking

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="BearerToken",
    description="An API token created with `jobs token create --org ORG`.",
)


def _unauthenticated() -> HTTPException:
    return HTTPException(
        status_code=401,
        detail=UNAUTHENTICATED_DETAIL,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _token_hash(credentials: HTTPAuthorizationCredentials | None) -> str:
    """The hash to look up; 401 at once for a missing or malformed token (no lookup)."""
    if credentials is None or not is_well_formed(credentials.credentials):
        raise _unauthenticated()
    return hash_token(credentials.credentials)


def _token_cache(request: Request) -> TokenCache:
    """The container's ``token_cache`` (the container is not imported: it imports the routes
    that import this module)."""
    cache: TokenCache = request.app.state.container.token_cache()
    return cache


def _authenticated(request: Request) -> str | None:
    """The org :class:`jobs_api.guard.AuthenticateFirst` resolved before the body was read."""
    org_id = getattr(request.state, "jobs_org", None)
    return org_id if isinstance(org_id, str) else None


async def current_org(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The org of the request's bearer token; 401 for a missing, malformed, unknown or revoked
    token, always with the same body.

    A remembered token is answered on the event loop; only a lookup in the store goes to the
    thread pool (a sync dependency would cost a thread hand-off on every request). Behind
    :class:`jobs_api.guard.AuthenticateFirst` the org is already resolved: taken from the state.
    """
    authenticated = _authenticated(request)
    if authenticated is not None:
        return authenticated
    return await resolve_org(request, credentials)


async def resolve_org(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str:
    """:func:`current_org` without the org the guard left in the request state: a fresh answer,
    for a long request (the event stream) that checks again that its token still holds."""
    if credentials is None:
        cookie = session_cookie(request)
        session = None if cookie is None else await session_org(request, cookie)
        if session is None:
            raise _unauthenticated()
        return session
    token_hash = _token_hash(credentials)
    cache = _token_cache(request)
    org_id = cache.cached(token_hash)
    if org_id is None:
        org_id = await run_in_threadpool(cache.org_for, token_hash)
    if org_id is None:
        raise _unauthenticated()
    return org_id


def current_org_blocking(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """:func:`current_org` as a plain function (FastAPI runs it in the thread pool), for the
    routers of modules that take a synchronous dependency (``jobs_imports.api``)."""
    authenticated = _authenticated(request)
    if authenticated is not None:
        return authenticated
    if credentials is None:
        cookie = session_cookie(request)
        session = None if cookie is None else session_org_blocking(request, cookie)
        if session is None:
            raise _unauthenticated()
        return session
    org_id = _token_cache(request).org_for(_token_hash(credentials))
    if org_id is None:
        raise _unauthenticated()
    return org_id


CurrentOrgDep = Annotated[str, Depends(current_org)]
"""The org the request acts for, resolved from ``Authorization: Bearer <token>``, else from the
browser session cookie (docs/sessions.md: a write must then send ``X-CSRF-Token``)."""
