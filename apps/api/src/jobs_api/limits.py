"""A request body size limit, enforced before any route reads the body, on every route."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobs_api.problems import problem

DRAIN_LIMIT_BYTES = 64 * 1024
"""A request whose declared body is at most this large keeps its connection when the route
answers without reading it (uvicorn discards the small rest); a larger or chunked body left
unread is answered with ``Connection: close``, so the server never reads a body nobody wants."""

_CLOSE = (b"connection", b"close")


class BodySizeLimit:
    """Refuse request bodies larger than ``max_bytes`` with a 413 problem, and never read more.

    A declared ``Content-Length`` over the limit is refused before reading anything; a chunked
    body (no length) is counted as it streams and refused as soon as it passes the limit. Every
    ``413`` is answered with ``Connection: close``, and so is every answer given while a chunked
    or large body is still unread (a route that reads no body, a ``401``, a ``404``): uvicorn
    then closes the connection after the answer instead of reading the rest of the body to
    reach the next request (a client could otherwise make it read gigabytes, with or without
    credentials). The streamed case raises a 413 ``HTTPException`` from ``receive``: FastAPI
    lets an ``HTTPException`` raised while reading the body through to the app's handlers, which
    answer it as a problem like any other error.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, path_limits: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # Routes whose body is a file (a module's upload) get their own, larger limit.
        self.path_limits = dict(path_limits or {})

    def _detail(self, limit: int) -> str:
        return f"the request body is larger than {limit} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, counting its body; close the connection of a refused or
        unfinished large body."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.path_limits.get(scope["path"], self.max_bytes)
        declared = declared_body(scope)
        if declared is not None and declared > limit:
            response = problem(413, self._detail(limit), headers={"Connection": "close"})
            await response(scope, receive, send)
            return

        received = 0
        # Nothing left to read: no body, or a small declared one uvicorn may discard.
        finished = declared is not None and declared <= DRAIN_LIMIT_BYTES

        async def counting_receive() -> Message:
            nonlocal received, finished
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, self._detail(limit), headers={"Connection": "close"})
                if not message.get("more_body", False):
                    finished = True
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and (
                message["status"] == 413 or not finished
            ):
                headers = list(message.get("headers", []))
                if _CLOSE not in [(name.lower(), value.lower()) for name, value in headers]:
                    headers.append(_CLOSE)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, counting_receive, closing_send)


def declared_body(scope: Scope) -> int | None:
    """The declared body length (0 without a body), or None for a chunked or malformed one."""
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
