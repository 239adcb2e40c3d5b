"""Two ASGI middlewares that keep the server sane in front of the routes.

:class:`AuthenticateFirst` checks the bearer token (or the browser session cookie) of every
route that acts for an org *before* the app reads one byte of the request body. FastAPI reads
and parses the body (for a multipart upload: spools it to a temporary file) before it solves a
route's dependencies, so a token dependency alone would let an anonymous client make the server
store a whole upload before it answers 401. When the routed request first asks for its body and
its route depends on the org dependency (``jobs_api.auth.current_org`` or
``current_org_blocking``), the token is resolved first; the org found is left in the request
state for the dependency, so a token is looked up once per request. Which routes are guarded is
read from the routes themselves: a module's router that takes the org dependency is guarded
without being listed anywhere.

:class:`KeepConnectionOnError` answers an unexpected error with the 500 problem itself instead
of letting it reach Starlette's outermost error middleware, which answers and then re-raises:
uvicorn then drops the keep-alive connection without saying so. Here the connection stays
usable; an error raised after the response has started is re-raised (nothing else can be done).

See ``docs/http.md`` for the rules, decision 0011 for why they live here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from jobs_core import StoreUnavailable
from jobs_tokens import TokenCache, hash_token, is_well_formed
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobs_api.auth import current_org, current_org_blocking
from jobs_api.problems import UNAUTHENTICATED_DETAIL

log = logging.getLogger("jobs.api")

ORG_STATE = "jobs_org"
"""The key of the authenticated org in the request state (``request.state.jobs_org``)."""

DRAIN_LIMIT_BYTES = 64 * 1024
"""A refused request whose declared body is at most this large keeps its connection (the server
discards the small body after answering); a larger or chunked one is answered with
``Connection: close``, so the server never reads a body it refused."""

_ORG_DEPENDENCIES: frozenset[Callable[..., Any]] = frozenset({current_org, current_org_blocking})


def _depends_on_org(dependant: Dependant) -> bool:
    return any(
        dependency.call in _ORG_DEPENDENCIES or _depends_on_org(dependency)
        for dependency in dependant.dependencies
    )


def _declared_body(scope: Scope) -> int | None:
    """The declared body length (0 without a body), or None for a chunked body."""
    length = 0
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
        elif name == b"transfer-encoding":
            return None
    return length


def _bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text: str = value.decode("latin-1")
            scheme, _, credentials = text.partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


class GuardRefusal(HTTPException):
    """A request refused while its body was about to be read, answered as a problem of ``kind``
    (FastAPI lets an ``HTTPException`` raised by ``receive`` reach the app's handlers)."""

    def __init__(
        self, status: int, detail: str, headers: dict[str, str], kind: str | None = None
    ) -> None:
        super().__init__(status, detail, headers=headers)
        self.problem_kind = kind


class AuthenticateFirst:
    """401 for a route that acts for an org, before the first byte of its body is read.

    The check sits in ``receive``: the app asks for the body only after routing, when
    ``scope["route"]`` names the route, and before any parsing (for a multipart upload, before
    any spooling). A route that depends on the org dependency gets its token resolved there; a
    route that reads no body is authenticated by the dependency as before. ``token_cache``
    returns the app's :class:`~jobs_tokens.TokenCache`.
    """

    def __init__(self, app: ASGIApp, token_cache: Callable[[], TokenCache]) -> None:
        self.app = app
        self.token_cache = token_cache
        self._guarded: dict[int, bool] = {}

    def _is_guarded(self, route: object) -> bool:
        if not isinstance(route, APIRoute):
            return False
        known = self._guarded.get(id(route))
        if known is None:
            known = self._guarded[id(route)] = _depends_on_org(route.dependant)
        return known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with a ``receive`` that authenticates first."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        checked = False

        async def authenticating_receive() -> Message:
            nonlocal checked
            if not checked:
                checked = True
                if self._is_guarded(scope.get("route")):
                    await self._authenticate(scope)
            return await receive()

        await self.app(scope, authenticating_receive, send)

    async def _authenticate(self, scope: Scope) -> None:
        declared = _declared_body(scope)
        close = {} if declared is not None and declared <= DRAIN_LIMIT_BYTES else _CLOSE
        token = _bearer_token(scope)
        org_id: str | None = None
        try:
            if token is None:
                # A browser session (docs/sessions.md): the same org scoping, and a write without
                # the session's CSRF token is refused (403) before its body is read as well.
                org_id = await _session_org(scope, close)
            elif is_well_formed(token):
                cache = self.token_cache()
                token_hash = hash_token(token)
                org_id = cache.cached(token_hash)
                if org_id is None:
                    org_id = await run_in_threadpool(cache.org_for, token_hash)
        except StoreUnavailable as error:
            log.warning("token lookup failed, the store is unavailable: %s", error)
            raise GuardRefusal(
                503,
                "the job store is unavailable; retry later",
                {"Retry-After": "1", **close},
                kind="store-unavailable",
            ) from None
        if org_id is None:
            raise GuardRefusal(401, UNAUTHENTICATED_DETAIL, {"WWW-Authenticate": "Bearer", **close})
        scope.setdefault("state", {})[ORG_STATE] = org_id


_CLOSE = {"Connection": "close"}


async def _session_org(scope: Scope, close: dict[str, str]) -> str | None:
    """The org of the request's session cookie, if it carries a live one; a write without the
    session's CSRF token is refused here (a plain exception raised while FastAPI reads the body
    would become its 400 "error parsing the body")."""
    from starlette.requests import Request

    from jobs_api.sessions import CSRF_DETAIL, CsrfRejected, session_cookie, session_org

    request = Request(scope)
    cookie = session_cookie(request)
    if cookie is None:
        return None
    try:
        return await session_org(request, cookie)
    except CsrfRejected:
        raise GuardRefusal(403, CSRF_DETAIL, close, kind="csrf") from None


class KeepConnectionOnError:
    """Answer an unexpected error with a 500 problem here, so the connection stays usable."""

    def __init__(self, app: ASGIApp, on_error: Callable[[Scope, Exception], Any]) -> None:
        self.app = app
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; answer an error raised before the response started."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            if started:
                raise
            response = self.on_error(scope, error)
            await response(scope, receive, send)
