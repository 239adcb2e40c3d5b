"""The worker process :mod:`bench.run`'s drains start (``python -m bench.run worker``), and its
handle."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import nolog, wiring
from bench.common import (
    EXEC_FILE_ENV,
    ExecRecorder,
    make_registry,
    rounded,
)
from bench.run_options import (
    ROOT,
    log,
)

# ---- the worker process ------------------------------------------------------------------------


def worker_command(url: str, concurrency: int) -> list[str]:
    """The command line of one benchmark worker process."""
    return [
        sys.executable,
        "-m",
        "bench.run",
        "worker",
        "--database-url",
        url,
        "--concurrency",
        str(concurrency),
    ]


class WorkerProcess:
    """One real jobs worker (``jobs_worker``) in its own process, recording into ``exec_file``."""

    def __init__(self, url: str, concurrency: int, exec_file: Path, log_file: Path) -> None:
        env = dict(os.environ)
        env[EXEC_FILE_ENV] = str(exec_file)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.log_file = log_file
        self._log = open(log_file, "wb")  # noqa: SIM115 - closed in stop()
        self.spawned = time.time()
        self.proc = subprocess.Popen(
            worker_command(url, concurrency),
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def stop(self, grace_s: float = 30.0) -> dict[str, Any]:
        """SIGTERM, then wait for a graceful exit (SIGKILL after ``grace_s``)."""
        began = time.time()
        how = "exited-early"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
                how = "sigterm"
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                how = "sigkill"
        self._log.close()
        return {"stop": how, "stop_s": rounded(time.time() - began, 2), "rc": self.proc.returncode}

    def tail_log(self, lines: int = 15) -> str:
        """The end of the worker's log, for an error message."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def worker_main(argv: list[str]) -> int:
    """``python -m bench.run worker``: run one jobs worker until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m bench.run worker")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)
    if nolog.install_if_asked():
        log("this worker writes no event rows (JOBS_BENCH_NO_LOG=1, bench/nolog.py)")
    registry = make_registry(ExecRecorder())
    return wiring.run_worker(args.database_url, registry, args.concurrency)
