"""Child processes for ``jobs dev``: started in their own process group, tied to their parent.

A terminal's Ctrl-C signals the whole foreground process group. The children are put in their own
group so that only the supervisor receives it and then stops each child exactly once, with
SIGTERM (a second signal makes uvicorn and the worker skip their graceful shutdown). On Linux a
child also asks the kernel for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so even a
``kill -9`` of the supervisor leaves no orphan behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

_PR_SET_PDEATHSIG = 1


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def _tie_to_parent(libc: Any, parent_pid: int) -> Any:
    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        # The parent may have died between fork and prctl: the signal would never come.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def spawn(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a child in its own process group, terminated if this process dies."""
    kwargs: dict[str, Any] = {}
    if os.name == "posix":
        kwargs["process_group"] = 0
        libc = _libc()
        if libc is not None:
            kwargs["preexec_fn"] = _tie_to_parent(libc, os.getpid())
    return subprocess.Popen(list(argv), env=dict(env), **kwargs)


def stop(children: Sequence[subprocess.Popen[bytes]], grace_s: float) -> None:
    """SIGTERM every live child, wait up to ``grace_s`` in total, then SIGKILL the rest."""
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        remaining = max(deadline - time.monotonic(), 0.0)
        try:
            child.wait(remaining)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
