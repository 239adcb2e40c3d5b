"""``/redoc`` served offline: ReDoc from the files fastapi-offline installs (as ``/docs`` is), and
a Content-Security-Policy that lets the page load nothing from another host. ReDoc's bundle
shows its vendor's logo from a CDN; the policy keeps the browser from asking for it, so the page
works, and tells nobody it was opened, on a machine without internet."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import HTMLResponse

REDOC_POLICY = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'"
)
"""ReDoc styles itself inline and searches in a blob worker; everything else from this origin."""


def install_redoc(app: FastAPI, assets: str, path: str = "/redoc") -> None:
    """Serve ReDoc at ``path``, its script from ``assets`` (fastapi-offline's static mount)."""

    @app.get(path, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{assets}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{assets}/favicon.png",
            with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = REDOC_POLICY
        return page
