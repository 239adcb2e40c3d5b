"""The worker processes of a chaos run (a position each, replaced when it dies) and the
runner's own database connection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos import jobtype
from bench.chaos.config import (
    APP_PREFIX,
    ROOT,
    Config,
    SetupError,
)


# -- workers ---------------------------------------------------------------------------------------
@dataclass
class WorkerSlot:
    """One worker position: a ``python -m jobs_worker`` process, replaced when it dies."""

    index: int
    url: str
    linked: bool
    process: subprocess.Popen[bytes] | None = None
    generation: int = 0
    log_paths: list[Path] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Fleet:
    """The worker processes, their deaths and replacements."""

    def __init__(self, config: Config, direct_url: str, linked_url: str | None, logs: Path) -> None:
        self.config = config
        self.logs = logs
        self.direct_url = direct_url
        self.journals = logs / "journal"
        self.journals.mkdir(exist_ok=True)
        self.slots = [
            WorkerSlot(i, linked_url if (i == 0 and linked_url) else direct_url, i == 0)
            for i in range(config.workers)
        ]
        self.killed: dict[int, float] = {}
        self.exited: dict[int, float] = {}
        self.ended: dict[int, float] = {}  # pid -> when the reaper saw it end
        self.exit_codes: dict[int, int] = {}
        self.unexpected_exits: list[dict[str, Any]] = []
        self.replacements = 0
        self.lock = threading.Lock()

    def start(self, slot: WorkerSlot) -> None:
        slot.generation += 1
        log_path = self.logs / f"worker-{slot.index}-{slot.generation}.log"
        slot.log_paths.append(log_path)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        env.update(
            {
                **self.config.worker_env,
                "JOBS_DATABASE_URL": slot.url,
                "JOBS_DATA_DIR": str(self.logs / "data"),
                jobtype.RECORDER_URL_ENV: self.direct_url,
                jobtype.JOURNAL_DIR_ENV: str(self.journals),
                "PGAPPNAME": self.app_name(slot),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            }
        )
        with log_path.open("wb") as log:
            slot.process = subprocess.Popen(
                [sys.executable, "-m", "jobs_worker"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the runner only; it stops them
            )
        threading.Thread(
            target=self._watch, args=(slot.process,), name="chaos-reaper", daemon=True
        ).start()

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        """Note the instant the process ends: an execution it left without an end row ran
        until then (never earlier, so no overlap is hidden)."""
        process.wait()
        self.ended[process.pid] = time.time()

    def start_all(self) -> None:
        for slot in self.slots:
            self.start(slot)

    def app_name(self, slot: WorkerSlot) -> str:
        """The ``application_name`` of the slot's current process's connections."""
        return f"{APP_PREFIX}{slot.index}-{slot.generation}"

    def wait_started(self, db: Db, timeout_s: float) -> None:
        """Wait until every worker has a session on the server (its worker log shows only
        warnings, so the server is where a start is seen)."""
        deadline = time.monotonic() + timeout_s
        for slot in self.slots:
            while not db.query(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = %s",
                (self.app_name(slot),),
            ):
                if not slot.alive():
                    raise SetupError(
                        f"worker {slot.index} exited at start:\n{_read(slot.log_paths[-1])[-2000:]}"
                    )
                if time.monotonic() > deadline:
                    raise SetupError(f"worker {slot.index} did not start within {timeout_s:g} s")
                time.sleep(0.1)

    def kill(self, slot: WorkerSlot) -> int | None:
        """``kill -9`` the slot's process and start its replacement; the pid killed."""
        with self.lock:
            process = slot.process
            if process is None or process.poll() is not None:
                return None
            self.killed[process.pid] = time.time()
            os.kill(process.pid, signal.SIGKILL)
            process.wait(30)
            self.killed[process.pid] = self._end_of(process)
            self.exit_codes[process.pid] = process.returncode
            self.replacements += 1
            self.start(slot)
            return process.pid

    def supervise(self) -> None:
        """Restart a worker that exited without being killed (as systemd would), noting it."""
        with self.lock:
            for slot in self.slots:
                process = slot.process
                if process is None or process.poll() is None:
                    continue
                self.exited[process.pid] = self._end_of(process)
                self.exit_codes[process.pid] = process.returncode
                self.unexpected_exits.append(
                    {
                        "slot": slot.index,
                        "pid": process.pid,
                        "code": process.returncode,
                        "log": str(slot.log_paths[-1]),
                        "tail": _read(slot.log_paths[-1])[-1500:],
                    }
                )
                self.replacements += 1
                self.start(slot)

    def _end_of(self, process: subprocess.Popen[bytes]) -> float:
        deadline = time.monotonic() + 1.0  # the reaper notes it a moment after wait() returns
        while process.pid not in self.ended and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.ended.get(process.pid, time.time())

    def alive_count(self) -> int:
        return sum(slot.alive() for slot in self.slots)

    def stop_all(self, timeout_s: float) -> list[int]:
        """SIGTERM every worker, wait, SIGKILL what is left; the pids that had to be killed."""
        with self.lock:
            for slot in self.slots:
                if slot.alive():
                    assert slot.process is not None
                    slot.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            stuck = []
            for slot in self.slots:
                process = slot.process
                if process is None:
                    continue
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stuck.append(process.pid)
                    process.kill()
                    process.wait(10)
                self.exited.setdefault(process.pid, self._end_of(process))
                self.exit_codes[process.pid] = process.returncode
            return stuck

    def kill_all(self) -> None:
        for slot in self.slots:
            if slot.alive():
                assert slot.process is not None
                slot.process.kill()
                slot.process.wait(10)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# -- the database, as the runner sees it -----------------------------------------------------------
class Db:
    """The runner's own connection, reopened after a restart or a terminated backend."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def query(self, sql: str, params: Any = None, *, patience_s: float = 60.0) -> list[Any]:
        """Rows of ``sql``; retried through an outage for up to ``patience_s``."""
        import psycopg

        deadline = time.monotonic() + patience_s
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self.url, autocommit=True, application_name="chaos-runner"
                    )
                cursor = self._conn.execute(sql, params)
                return list(cursor.fetchall()) if cursor.description else []
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
