"""Real processes of a deployment that loads the module: ``jobs migrate``, ``jobs api``,
``jobs worker``, each configured only through its environment, as in production.

The module is not installed in the test environment (an installed module is loaded by every
process of the repository's own test suite), so the deployment names it:
``JOBS_MODULES=jobs_linkcheck.module:module``, with its source on ``PYTHONPATH``. An
installed module needs neither: its entry point is found (examples/linkcheck/README.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

PACE = {
    "JOBS_HEARTBEAT_S": "0.3",
    "JOBS_SWEEP_INTERVAL_S": "0.5",
    "JOBS_SWEEP_THRESHOLD_S": "2",
    "JOBS_POLL_INTERVAL_S": "0.2",
    "JOBS_CANCEL_CHECK_S": "0.2",
    "JOBS_SHUTDOWN_GRACE_S": "5",
}
"""Heartbeats and the sweep within seconds, so a killed worker's jobs come back quickly."""


def deployment_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of every process of the test deployment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        {
            "JOBS_DATABASE_URL": database_url,
            "JOBS_MODULES": "jobs_linkcheck.module:module",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
            "JOBS_LINKCHECK_ALLOW_PRIVATE": "1",  # the test sites are on 127.0.0.1
            **PACE,
            **extra,
        }
    )
    return env


def jobs(env: dict[str, str], *args: str) -> str:
    """Run a ``jobs`` command to its end; its output (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-m", "jobs_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"jobs {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done.stdout


class Process:
    """A long-running ``jobs`` command (``api``, ``worker``) with its log file."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jobs_cli", *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first match of ``pattern`` in the log (the process must stay alive meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.log())
            if found:
                return found
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the process exited ({self.process.returncode}):\n{self.log()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} after {timeout} s:\n{self.log()}")
            time.sleep(0.05)

    def kill9(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()
