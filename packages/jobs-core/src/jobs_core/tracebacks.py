"""A handler's traceback as its tenant may see it: the handler's frames only, each path relative
to its package.

A failed job's report is shown over HTTP and in the panel to the org that enqueued it. The
traceback of the exception as Python prints it starts in the framework that called the handler
(the runner, the worker, asyncio's machinery) and names every file by its absolute path on the
server (``/srv/app/.venv/lib/python3.11/site-packages/...``): both tell a tenant about the
server, neither helps them fix their handler. :func:`handler_traceback` keeps the frames of the
handler's own code and of what it called (libraries included), drops every frame of the
framework's packages (:data:`FRAMEWORK_PACKAGES`) and the standard library's frames that run
it, and names each file relative to the ``sys.path`` entry it was imported from
(``httpx/_client.py``, ``myjobs/crawl.py``).
"""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
import traceback

FRAMEWORK_PACKAGES: tuple[str, ...] = ("jobs_core", "jobs_worker", "jobs_postgres", "jobs_api")
"""The packages of the server: their frames are never shown to a tenant (looked up among the
loaded modules: naming a package here imports nothing)."""

_STDLIB = tuple(
    os.path.join(os.path.normpath(path), "")
    for path in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)


def handler_traceback(error: BaseException, max_chars: int, handler: object = None) -> str:
    """The traceback of ``error`` (its causes and contexts included) with the handler's frames
    only, at most its last ``max_chars`` characters.

    ``handler``: the job type's handler. When it is a function, its own file is the job's code
    wherever it sits, so its frames are kept even inside a framework package (the development
    demo types of ``jobs_worker.demo``); a callable object (a subprocess handler) is machinery.
    """
    shown = traceback.TracebackException.from_exception(error)
    framework = _framework_dirs()
    own = _function_file(handler)
    roots = sorted(
        (os.path.join(os.path.normpath(p), "") for p in sys.path if p), key=len, reverse=True
    )
    seen: set[int] = set()
    pending = [shown]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = _handler_frames(current.stack, framework, roots, own)
        if getattr(current, "filename", None):  # a SyntaxError names its file as well
            current.filename = _relative(str(current.filename), roots)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "".join(shown.format())[-max_chars:]


def _framework_dirs() -> tuple[str, ...]:
    dirs = []
    for name in FRAMEWORK_PACKAGES:
        module = sys.modules.get(name)
        for path in getattr(module, "__path__", ()):
            dirs.append(os.path.join(os.path.normpath(path), ""))
    return tuple(dirs)


def _is_stdlib(filename: str) -> bool:
    path = os.path.normpath(filename)
    return path.startswith(_STDLIB) and not any(
        part in path for part in ("site-packages", "dist-packages")
    )


def _function_file(handler: object) -> str | None:
    """The file of ``handler``'s code if it is a function or a method, else None."""
    function = getattr(handler, "__func__", handler)
    if not inspect.isfunction(function):
        return None
    return os.path.normpath(function.__code__.co_filename)


def _handler_frames(
    stack: traceback.StackSummary,
    framework: tuple[str, ...],
    roots: list[str],
    own: str | None = None,
) -> traceback.StackSummary:
    kept: list[traceback.FrameSummary] = []
    for frame in stack:
        path = os.path.normpath(frame.filename)
        if path.startswith(framework) and path != own:
            continue  # the server's own code, wherever it sits in the stack
        if not kept and (_is_stdlib(path) or frame.filename.startswith("<")):
            continue  # what runs the handler (threading, asyncio) before its first frame
        kept.append(
            traceback.FrameSummary(
                _relative(frame.filename, roots),
                frame.lineno,
                frame.name,
                lookup_line=False,
                line=frame.line,  # stripped: without the columns, no carets drawn off it
            )
        )
    return traceback.StackSummary.from_list(kept)


def _relative(filename: str, roots: list[str]) -> str:
    """``filename`` relative to the longest ``sys.path`` entry holding it (its package path),
    else its base name."""
    path = os.path.normpath(filename)
    for root in roots:
        if path.startswith(root):
            return path[len(root) :]
    return os.path.basename(path)
