"""The web Jobs panel: static HTML, CSS and JavaScript modules served by the API.

No build step and no Node.js: the files under ``assets/`` are what the browser runs, shipped as
package data of ``jobs_api`` and read once when the router is built. ``/`` is the panel,
``/signin`` the sign-in page, ``/panel/<file>`` its scripts and style sheet. Every page is served
with a Content-Security-Policy that allows scripts, styles and connections from this origin only
(no inline script, no third-party code), so an injected string in a job's payload or error can
never run (decision 0014).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import APIRouter, Request, Response

ASSETS = resources.files(__name__) / "assets"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}

_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True, slots=True)
class Asset:
    """One file of the panel, held in memory with its validator."""

    body: bytes
    media_type: str
    etag: str


def load_assets() -> dict[str, Asset]:
    """Every file of ``assets/`` by name (read once: the set is small and fixed)."""
    found: dict[str, Asset] = {}
    for entry in ASSETS.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if not entry.is_file() or suffix not in _MEDIA_TYPES:
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        found[entry.name] = Asset(body, _MEDIA_TYPES[suffix], etag)
    return found


def _serve(asset: Asset, request: Request) -> Response:
    # no-cache = revalidate every time: a new release is picked up at once, an unchanged file
    # costs a 304.
    headers = {**_SECURITY_HEADERS, "ETag": asset.etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def build_router() -> APIRouter:
    """The panel's routes (left out of the OpenAPI document: they are pages, not API)."""
    assets = load_assets()
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def panel(request: Request) -> Response:
        return _serve(assets["index.html"], request)

    @router.get("/signin")
    def signin_page(request: Request) -> Response:
        return _serve(assets["signin.html"], request)

    @router.get("/panel/{name}")
    def asset(name: str, request: Request) -> Response:
        found = assets.get(name)
        if found is None or name.endswith(".html"):
            return Response("no such file", status_code=404, media_type="text/plain")
        return _serve(found, request)

    return router
