"""A real API process for the tests: ``python -m jobs_api`` under uvicorn on a free port."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60


class ApiProcess:
    """A running ``python -m jobs_api`` and its base URL."""

    def __init__(self, env: dict[str, str], registries: tuple[str, ...]) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobs_api",
                "--host",
                "127.0.0.1",
                "--port",
                "0",  # the OS picks a free port; uvicorn logs the one it bound
                *(f"--registry={spec}" for spec in registries),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.log: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()
        self.base_url = self._wait_for_port(lines)

    def _pump(self, lines: queue.Queue[str | None]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line)
            lines.put(line)
        lines.put(None)

    def _wait_for_port(self, lines: queue.Queue[str | None]) -> str:
        while True:
            try:
                line = lines.get(timeout=STARTUP_TIMEOUT_S)
            except queue.Empty:
                self.stop()
                raise AssertionError("the API did not start:\n" + "".join(self.log)) from None
            if line is None:
                raise AssertionError("the API exited at startup:\n" + "".join(self.log))
            match = re.search(r"Uvicorn running on (http://\S+)", line)
            if match:
                return match.group(1)

    def stop(self) -> None:
        """SIGTERM, and check the server shut down gracefully.

        Uvicorn finishes its shutdown (lifespan included), then re-raises the signal it caught,
        so the process ends by SIGTERM as any signalled process would.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        assert code in (0, -signal.SIGTERM), "".join(self.log)

    @property
    def shut_down_cleanly(self) -> bool:
        """Whether the app's shutdown ran to completion."""
        return any("Application shutdown complete" in line for line in self.log)
