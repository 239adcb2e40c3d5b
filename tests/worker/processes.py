"""Real worker processes for the tests: ``python -m jobs_worker`` children with a log file each,
paced so that the sweep and heartbeats happen within seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.worker.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]

PACE = {
    "JOBS_HEARTBEAT_S": "0.3",
    "JOBS_SWEEP_INTERVAL_S": "0.5",
    "JOBS_SWEEP_THRESHOLD_S": "2",
    "JOBS_POLL_INTERVAL_S": "0.5",
    "JOBS_CANCEL_CHECK_S": "0.2",
    "JOBS_SHUTDOWN_GRACE_S": "20",
}


class WorkerProcess:
    """One ``python -m jobs_worker`` child with its log file."""

    def __init__(
        self, url: str, log_path: Path, env: dict[str, str], pace: dict[str, str] | None = None
    ) -> None:
        self.log_path = log_path
        self.app_name = f"jobs-worker-test-{uuid.uuid4().hex[:8]}"
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        child_env.update(
            {
                "JOBS_DATABASE_URL": url,
                "JOBS_DEMO_TYPES": "1",
                "PGAPPNAME": self.app_name,  # libpq tags every connection of this process
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
                ),
                **(PACE if pace is None else pace),
                **env,
            }
        )
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jobs_worker"],
            cwd=ROOT,
            env=child_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_started(self, timeout: float = 60) -> None:
        wait_until(
            lambda: "event=worker.started" in self.log() or self.process.poll() is not None,
            timeout,
            "the worker to start",
        )
        assert self.process.poll() is None, f"the worker exited early:\n{self.log()}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def wait_exit(self, timeout: float = 30) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker did not exit:\n{self.log()}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()
