"""Running the real ``jobs`` console script in subprocesses, with bounded waits."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psutil  # type: ignore[import-untyped]  # (a pgserver dependency; no stubs installed)

JOBS = Path(sys.executable).with_name("jobs")
"""The console script installed in the test environment (the one ``uv run jobs`` runs)."""

T = TypeVar("T")


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any ``JOBS_`` variable, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(values)
    return env


def new_org() -> str:
    """An org name no other test uses (the session's database is shared)."""
    return f"cli-{uuid.uuid4().hex[:10]}"


def run_jobs(
    env: Mapping[str, str], *args: str, timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``jobs *args`` to completion; stdout and stderr captured as text."""
    return subprocess.run(
        [str(JOBS), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have succeeded (else a readable assertion)."""
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result.stdout


def last_line(text: str) -> str:
    """The last non-empty line."""
    return [line for line in text.splitlines() if line.strip()][-1].strip()


def assert_one_line_error(
    result: subprocess.CompletedProcess[str], code: int, *needles: str
) -> None:
    """The command failed with ``code``, one line on stderr containing ``needles``, no traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def show_json(env: Mapping[str, str], job_id: str, *extra: str) -> dict[str, Any]:
    """``jobs show ID --json`` parsed."""
    data: dict[str, Any] = json.loads(ok(run_jobs(env, "show", job_id, "--json", *extra)))
    return data


def wait_until(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.2) -> T:
    """Call ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Output:
    """Drains a child's merged stdout/stderr on a thread so it can never block on a full pipe,
    and lets a test wait for a line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self._stream = process.stdout
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        for line in self._stream:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str:
        """The first line satisfying ``predicate``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"timed out after {timeout:.0f} s; output so far:\n" + self.text()
                    )
                self._changed.wait(remaining)

    def text(self) -> str:
        """Everything read so far."""
        return "\n".join(self.lines)

    def join(self, timeout: float) -> None:
        """Wait for the end of the output (the process closed it)."""
        self._thread.join(timeout)


def start(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None, *, new_group: bool = False
) -> tuple[subprocess.Popen[str], Output]:
    """Start a long-running command with its output drained by an :class:`Output`."""
    process = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=new_group,
    )
    return process, Output(process)


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below ``pid``."""
    try:
        children: list[psutil.Process] = psutil.Process(pid).children(recursive=True)
        return children
    except psutil.NoSuchProcess:
        return []


def assert_all_gone(processes: Sequence[psutil.Process], timeout: float = 10) -> None:
    """Every process in ``processes`` has exited (zombies reaped or not, none still running)."""
    _, alive = psutil.wait_procs(list(processes), timeout=timeout)
    still = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not still, [(p.pid, p.cmdline()) for p in still]


def token_of(output: Output, timeout: float) -> str:
    """The token ``jobs dev`` prints on its ``token:`` line."""
    line = output.wait_for(lambda text: text.startswith("token: "), timeout)
    return line.removeprefix("token: ").strip()


class InProcess:
    """``jobs`` run in this process (same code path as the console script, minus the process
    start): for the variants of a command whose subprocess run is already covered."""

    def __init__(self, capsys: Any) -> None:
        self._capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """``(exit code, stdout, stderr)`` of ``jobs *args``."""
        from jobs_cli.main import main

        self._capsys.readouterr()
        code = main(list(args))
        captured = self._capsys.readouterr()
        return code, captured.out, captured.err
