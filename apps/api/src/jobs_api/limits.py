"""A request body size limit, enforced before any route reads the body."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobs_api.problems import problem


class BodySizeLimit:
    """Refuse request bodies larger than ``max_bytes`` with a 413 problem.

    A declared ``Content-Length`` over the limit is refused before reading anything; a chunked
    body (no length) is counted as it streams and refused as soon as it passes the limit, so a
    client can never make the app buffer more than ``max_bytes``. The streamed case raises a 413
    ``HTTPException`` from ``receive``: FastAPI lets an ``HTTPException`` raised while reading the
    body through to the app's handlers, which answer it as a problem like any other error.
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
        """Pass the request on, counting its body."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.path_limits.get(scope["path"], self.max_bytes)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            response = problem(413, self._detail(limit), headers={"Connection": "close"})
            await response(scope, receive, send)
            return

        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, self._detail(limit))
            return message

        await self.app(scope, counting_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
