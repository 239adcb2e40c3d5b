"""Browser sessions: ``POST/GET/DELETE /session`` and the cookie half of ``current_org``
(docs/sessions.md, decision 0013).

A person signs in with an API token sent in a JSON body; the browser then holds a random session
cookie (HttpOnly, SameSite=Strict, Secure over HTTPS) and page scripts never hold the token. The
store keeps only ``sha256(cookie)`` with the token it was opened with, so revoking the token ends
its sessions (the session stores and the hashing are ``jobs_tokens``). A
cookie-authenticated write must carry ``X-CSRF-Token``: a keyed hash of the cookie that only a
page of the API's origin can learn (from ``GET /session``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from jobs_core.ports import Clock
from jobs_tokens import SessionStore, TokenCache, hash_session, hash_token, is_well_formed
from pydantic import BaseModel, ConfigDict, Field

from jobs_api.problems import UNAUTHENTICATED_DETAIL, ProblemResponse, problem, problem_responses

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_COOKIE_BYTES = 32
_MAX_COOKIE_CHARS = 100


def csrf_token(cookie: str) -> str:
    """The CSRF token of a session: bound to its cookie, unguessable without it."""
    digest = hmac.new(cookie.encode(), b"jobs-csrf", hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def session_cookie(request: Request) -> str | None:
    """The session cookie the request carries, if it has a plausible shape."""
    name = _container(request).config.session_cookie()
    value = request.cookies.get(name)
    if not value or len(value) > _MAX_COOKIE_CHARS:
        return None
    return value


class CsrfRejected(Exception):
    """A cookie-authenticated write without the right ``X-CSRF-Token``."""


async def session_org(request: Request, cookie: str) -> str | None:
    """The org of the request's session, or None; raises :class:`CsrfRejected` for a write
    (not GET/HEAD/OPTIONS) without the session's CSRF token."""
    from starlette.concurrency import run_in_threadpool

    cache = _container(request).session_cache()
    session_hash = hash_session(cookie)
    org_id = cache.cached(session_hash)
    if org_id is None:
        org_id = await run_in_threadpool(cache.org_for, session_hash)
    if org_id is None:
        return None
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), csrf_token(cookie).encode()):
            raise CsrfRejected()
    return org_id


def session_org_blocking(request: Request, cookie: str) -> str | None:
    """:func:`session_org` for a synchronous dependency (run in the thread pool)."""
    org_id = _container(request).session_cache().org_for(hash_session(cookie))
    if org_id is not None and request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), csrf_token(cookie).encode()):
            raise CsrfRejected()
    return org_id


class _Wiring(Protocol):
    """What this module asks of the app's container (``jobs_api.containers.Container``), named
    here so that the credential modules never import the composition root (no import cycle)."""

    config: Any

    def clock(self) -> Clock: ...

    def session_store(self) -> SessionStore: ...

    def session_cache(self) -> TokenCache: ...


def _container(request: Request) -> _Wiring:
    container: _Wiring = request.app.state.container
    return container


CSRF_DETAIL = (
    f"a request authenticated by the session cookie must send the {CSRF_HEADER} header "
    "with the csrf_token of GET /session"
)
"""What a cookie-authenticated write without its CSRF token is told (403)."""


def _csrf_rejected(request: Request, exc: Exception) -> ProblemResponse:
    return problem(403, CSRF_DETAIL, kind="csrf")


def install_session_handlers(app: FastAPI) -> None:
    """Answer :class:`CsrfRejected` with a 403 problem saying what to send."""
    app.add_exception_handler(CsrfRejected, _csrf_rejected)


# ---- routes ----------------------------------------------------------------------------------


class SessionIn(BaseModel):
    """``POST /session``: the API token to sign in with (in the body, never in the URL)."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=200, description="An API token (`jobs_…`).")


class SessionOut(BaseModel):
    """A live session: its org, the CSRF token its writes must send, when it ends."""

    org_id: str
    csrf_token: str
    expires_at: datetime


router = APIRouter(tags=["session"])


def _unauthenticated() -> HTTPException:
    return HTTPException(status_code=401, detail=UNAUTHENTICATED_DETAIL)


@router.post(
    "/session",
    response_model=SessionOut,
    summary="Sign in: exchange an API token for a session cookie",
    responses=problem_responses(400, 401, 415, 422),
)
def open_session(body: SessionIn, request: Request, response: Response) -> SessionOut:
    """Sets the HttpOnly, SameSite=Strict session cookie (Secure over HTTPS); the answer holds
    the CSRF token that cookie-authenticated writes must send as ``X-CSRF-Token``."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        # A cross-site form cannot send JSON: this closes sign-in CSRF (login as another org).
        raise HTTPException(415, "send the token as a JSON body (Content-Type: application/json)")
    if not is_well_formed(body.token):
        raise _unauthenticated()
    container = _container(request)
    now = container.clock().now()
    ttl = float(container.config.session_ttl_s())
    expires_at = now + timedelta(seconds=ttl)
    cookie = secrets.token_urlsafe(_COOKIE_BYTES)
    org_id = container.session_store().open(
        hash_token(body.token), hash_session(cookie), now, expires_at
    )
    if org_id is None:
        raise _unauthenticated()
    response.set_cookie(
        container.config.session_cookie(),
        cookie,
        max_age=int(ttl),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return SessionOut(org_id=org_id, csrf_token=csrf_token(cookie), expires_at=expires_at)


@router.get(
    "/session",
    response_model=SessionOut,
    summary="The session of the cookie: its org and CSRF token",
    responses=problem_responses(401),
)
def read_session(request: Request) -> SessionOut:
    """What a reloaded page asks to get its CSRF token back (never stored by scripts)."""
    cookie = session_cookie(request)
    if cookie is None:
        raise _unauthenticated()
    container = _container(request)
    session_hash = hash_session(cookie)
    org_id = container.session_cache().org_for(session_hash)
    expires_at = container.session_store().expires_at(session_hash) if org_id else None
    if org_id is None or expires_at is None:
        raise _unauthenticated()
    return SessionOut(org_id=org_id, csrf_token=csrf_token(cookie), expires_at=expires_at)


@router.delete(
    "/session",
    status_code=204,
    response_class=Response,
    summary="Sign out: end the session and clear its cookie",
    responses=problem_responses(403),
)
def close_session(request: Request) -> Response:
    """Ends the session in the store (a replayed cookie is dead) and clears the cookie."""
    container = _container(request)
    cookie = session_cookie(request)
    if cookie is not None:
        session_hash = hash_session(cookie)
        if container.session_cache().org_for(session_hash) is not None:
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), csrf_token(cookie).encode()):
                raise CsrfRejected()
        container.session_store().end(session_hash, container.clock().now())
        container.session_cache().forget(session_hash)
    answer = Response(status_code=204)
    answer.delete_cookie(
        container.config.session_cookie(),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return answer
