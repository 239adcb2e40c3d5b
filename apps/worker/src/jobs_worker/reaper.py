"""The reaper: a tiny helper process that kills a worker's children when the worker dies.

``PR_SET_PDEATHSIG`` (set on every child) kills a child when its parent dies, even by
``kill -9``, but not the processes that child started itself (a shell script's commands). The
reaper covers those: the worker starts it once, keeps the write end of a pipe to its stdin and
tells it ``+<pgid>`` / ``-<pgid>`` as children start and end. When the worker dies, however it
dies, the kernel closes the pipe; the reaper reads EOF and sends SIGKILL to every process group
still listed, then exits.

Run as a script (``python -I -S .../reaper.py``) by :class:`Reaper`: standard library only, a
few MB.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading


def main() -> int:
    """Read ``+pgid`` / ``-pgid`` lines from stdin until EOF, then kill what is left."""
    # The worker's terminal may send SIGINT/SIGTERM to the whole foreground group: the reaper
    # must outlive the worker to do its job, and it exits on EOF anyway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    groups: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if len(line) < 2 or line[:1] not in (b"+", b"-"):
            continue
        try:
            pgid = int(line[1:])
        except ValueError:
            continue
        if line[:1] == b"+":
            groups.add(pgid)
        else:
            groups.discard(pgid)
    for pgid in groups:
        with contextlib.suppress(OSError):  # already gone
            os.killpg(pgid, signal.SIGKILL)
    return 0


class Reaper:
    """The worker's side: starts the reaper process on first use and feeds it process groups.

    One per worker process (:func:`shared`). If the reaper cannot be started, children still
    have ``PR_SET_PDEATHSIG``; the failure is reported once by :attr:`error`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._pid = -1
        self.error: str | None = None

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        if self._process is not None and self._pid == os.getpid():
            return self._process
        try:
            self._process = subprocess.Popen(
                # this file as a script: the standard library only, not the jobs_core package
                [sys.executable, "-I", "-S", os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._pid = os.getpid()
        except OSError as error:
            self.error = f"cannot start the reaper: {error}"
            self._process = None
        return self._process

    def _send(self, line: str) -> None:
        with self._lock:
            process = self._ensure()
            if process is None or process.stdin is None:
                return
            try:
                process.stdin.write(line.encode() + b"\n")
                process.stdin.flush()
            except OSError as error:
                self.error = f"the reaper is gone: {error}"
                self._process = None

    def watch(self, pgid: int) -> None:
        """Kill group ``pgid`` if this process dies before :meth:`forget`."""
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        """Group ``pgid`` is finished: leave it alone."""
        self._send(f"-{pgid}")

    @property
    def pid(self) -> int | None:
        """The reaper's process id, once started."""
        return self._process.pid if self._process is not None else None


_shared = Reaper()


def shared() -> Reaper:
    """This process's reaper."""
    return _shared


if __name__ == "__main__":  # pragma: no cover - run as a process
    sys.exit(main())
