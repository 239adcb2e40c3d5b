"""Running one attempt in a child process (the protocol of :mod:`jobs_core.protocol`).

:class:`SubprocessHandler` is a job handler like any other: the worker calls it on a slot
thread with the job's :class:`~jobs_core.JobContext`; it starts the child, feeds it its stdin
document, turns its stderr lines into progress and checkpoints, and its exit into the attempt's
outcome. Its lifecycle rules (docs/subprocess-protocol.md):

- the child runs in a **new session and process group**, with only the environment its spec
  gives it, in a scratch directory of its own (removed after);
- ``PR_SET_PDEATHSIG`` (through ``setpriv``, else a pre-exec ``prctl``) kills the child if the
  worker dies, even by ``kill -9``, and the
  :mod:`reaper <jobs_worker.reaper>` kills the rest of its process group;
- **cancellation** (the context cancelled: a request, a lost lease, the worker handing the job
  back at shutdown) sends SIGTERM to the group, then SIGKILL after ``kill_grace_s``; the
  attempt ends cancelled;
- the **timeout** does the same and fails the attempt as a timeout;
- when the child exits, whatever it left running in its group is killed.

Standard library only: ``subprocess``, ``selectors``, and ``ctypes`` for ``prctl``.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs_core import protocol
from jobs_core.context import JobContext
from jobs_core.errors import JobCancelled, JobTimeout

from jobs_worker import reaper

log = logging.getLogger("jobs.child")

_POLL_S = 0.05
_READ_CHUNK = 65536
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    # The process's own symbols (dlopen(NULL)): CPython is linked to the C library, so prctl is
    # there; ctypes.util.find_library("c") ran ldconfig in a subprocess, 0.1 s of every start.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):  # not Linux: the reaper still watches the groups
        return None
    return prctl


_PRCTL = _load_prctl()

_SETPRIV = shutil.which("setpriv")
"""util-linux's ``setpriv --pdeathsig KILL -- cmd`` sets the same flag then execs ``cmd``: an
exec instead of a Python pre-exec function, which forces a full ``fork`` of the worker (and a
Python callback in the child) where ``subprocess`` otherwise uses ``vfork``: ~3-5 ms per child
against ~13-25 ms (decision 0016). The pre-exec function is the fallback where ``setpriv`` is
missing."""


def _launch(argv: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """The command line and pre-exec step that make ``argv`` die with this process."""
    if _SETPRIV is not None:
        return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv], None
    return list(argv), _die_with_parent(os.getpid())


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """The pre-exec step: SIGKILL this child when its parent dies; exit if it already did."""

    def pre_exec() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died between fork and prctl
            os._exit(1)

    return pre_exec


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to run a type's child.

    - ``argv``: the command (the stdin document is its input);
    - ``cwd``: its working directory (the handler's directory);
    - ``env``: its whole environment (nothing of the worker's is inherited);
    - ``timeout_s``: the attempt's limit (None: none);
    - ``kill_grace_s``: between SIGTERM and SIGKILL;
    - ``context_mode``: an isolated Python handler: ``JOBCTX:`` lines carry its
      :class:`JobContext` writes verbatim and its checkpoint is the job's whole progress.
    """

    argv: tuple[str, ...]
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    kill_grace_s: float = 5.0
    context_mode: bool = False

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a child needs a command")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if self.kill_grace_s < 0:
            raise ValueError("kill_grace_s must be >= 0")


StdinExtra = Callable[[JobContext], Mapping[str, Any]]


class SubprocessHandler:
    """A handler that runs each attempt as a child process.

    ``enforces_timeout`` tells the runner this handler stops its own attempt at ``timeout_s``
    (it can kill a process; the runner's thread-based timeout could only stop waiting).
    """

    enforces_timeout = True

    def __init__(self, spec: ChildSpec, *, stdin_extra: StdinExtra | None = None) -> None:
        self.spec = spec
        self._stdin_extra = stdin_extra

    def __repr__(self) -> str:
        return f"SubprocessHandler({' '.join(self.spec.argv)!r})"

    def __call__(self, ctx: JobContext) -> dict[str, Any]:
        scratch = tempfile.mkdtemp(prefix=f"jobs-{ctx.job.id}-")
        try:
            return _Attempt(self.spec, ctx, scratch, self._stdin_extra).run()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


class _Attempt:
    """One child, from spawn to reaped."""

    def __init__(
        self, spec: ChildSpec, ctx: JobContext, scratch: str, stdin_extra: StdinExtra | None
    ) -> None:
        self.spec = spec
        self.ctx = ctx
        self.scratch = scratch
        self.tail = protocol.StderrTail()
        self.stdout = bytearray()
        self.stdout_overflow = False
        self._stderr_buffer = b""
        self._fraction = 0.0
        self._stage = ""
        self._checkpoint: dict[str, Any] | None = None
        self._unwritten = False  # the last PROGRESS line fell in the throttle
        job = ctx.job
        if spec.context_mode:
            checkpoint = dict(job.progress) if job.progress else None
        else:
            checkpoint = protocol.checkpoint_of(job.progress)
            self._checkpoint = checkpoint
        document = protocol.stdin_document(job, job.payload, checkpoint, scratch)
        if stdin_extra is not None:
            document.update(stdin_extra(ctx))
        self._pending = memoryview(protocol.encode_stdin(document))

    # -- the run --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        spec = self.spec
        env = dict(spec.env)
        env.setdefault("TMPDIR", self.scratch)
        argv, pre_exec = _launch(spec.argv)
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=spec.cwd,
                env=env,
                start_new_session=True,
                preexec_fn=pre_exec,  # noqa: PLW1509 - prctl only, and only without setpriv
                close_fds=True,
            )
        except OSError as error:
            raise protocol.ChildFailed(f"cannot start {spec.argv[0]!r}: {error}") from None
        pgid = process.pid  # a new session: the child leads its own group
        watcher = reaper.shared()
        watcher.watch(pgid)
        try:
            stopped_for = self._communicate(process)
        finally:
            _kill_group(pgid, signal.SIGKILL)  # what the child left behind
            if process.poll() is None:
                process.wait()
            watcher.forget(pgid)
        if self._unwritten and stopped_for is None:
            self._write_progress(force=True)  # where the child got to, not a throttled past
        return self._outcome(process.returncode, stopped_for)

    def _communicate(self, process: subprocess.Popen[bytes]) -> str | None:
        """Pump the pipes until the child exits; stop it on cancellation or timeout.
        Returns why it was stopped (``cancelled``/``timeout``), or None."""
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        selector = selectors.DefaultSelector()
        os.set_blocking(process.stdin.fileno(), False)
        selector.register(process.stdin, selectors.EVENT_WRITE)
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        timeout_s = self.spec.timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        stopped_for: str | None = None
        kill_at: float | None = None
        try:
            while True:
                if not selector.get_map():
                    # both outputs closed: wait for the exit (bounded by the kill below)
                    if process.poll() is not None:
                        break
                    time.sleep(_POLL_S / 5)
                for key, _ in selector.select(_POLL_S):
                    self._ready(selector, key, process)
                now = time.monotonic()
                if process.poll() is not None:
                    # exited: whatever still holds the pipes is a straggler of its group
                    _kill_group(process.pid, signal.SIGKILL)
                    if not selector.get_map():
                        break
                    continue
                if stopped_for is None:
                    if self.ctx.cancelled:
                        stopped_for = "cancelled"
                    elif deadline is not None and now >= deadline:
                        stopped_for = "timeout"
                    if stopped_for is not None:
                        _kill_group(process.pid, signal.SIGTERM)
                        kill_at = now + self.spec.kill_grace_s
                elif kill_at is not None and now >= kill_at:
                    _kill_group(process.pid, signal.SIGKILL)
                    kill_at = None
        finally:
            for key in list(selector.get_map().values()):
                selector.unregister(key.fileobj)
            selector.close()
            for stream in (process.stdin, process.stdout, process.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
        return stopped_for

    def _ready(
        self,
        selector: selectors.BaseSelector,
        key: selectors.SelectorKey,
        process: subprocess.Popen[bytes],
    ) -> None:
        """Move data for one ready pipe: the stdin document in, the outputs out."""
        if key.fileobj is process.stdin:
            assert process.stdin is not None
            try:
                sent = os.write(key.fd, self._pending)
            except BlockingIOError:
                return
            except BrokenPipeError:  # the child does not read its input: fine
                sent = len(self._pending)
            self._pending = self._pending[sent:]
            if not self._pending:
                selector.unregister(process.stdin)
                process.stdin.close()
            return
        data = os.read(key.fd, _READ_CHUNK)
        if not data:
            selector.unregister(key.fileobj)
            if key.fileobj is process.stderr:
                self._on_stderr(b"", final=True)
        elif key.fileobj is process.stdout:
            self._on_stdout(data)
        else:
            self._on_stderr(data)

    # -- streams --------------------------------------------------------------------------------
    def _on_stdout(self, data: bytes) -> None:
        room = protocol.REPORT_MAX_BYTES + 1 - len(self.stdout)
        if room > 0:
            self.stdout += data[:room]
        if len(data) > room:
            self.stdout_overflow = True

    def _on_stderr(self, data: bytes, *, final: bool = False) -> None:
        buffer = self._stderr_buffer + data
        *lines, rest = buffer.split(b"\n")
        if final and rest:
            lines.append(rest)
            rest = b""
        if len(rest) > protocol.CHECKPOINT_MAX_BYTES * 2:  # a line that never ends
            lines.append(rest)
            rest = b""
        self._stderr_buffer = rest
        for raw in lines:
            self._on_line(raw.decode("utf-8", errors="replace"))

    def _on_line(self, text: str) -> None:
        try:
            line = protocol.parse_line(text)
        except protocol.ProtocolError as error:
            self.tail.add(text[: protocol.LINE_MAX_CHARS])
            self.ctx.logger.warning("job %s: %s", self.ctx.job.id, error)
            return
        if isinstance(line, protocol.Text):
            if line.text:
                self.tail.add(line.text)
                self.ctx.logger.info("job %s child: %s", self.ctx.job.id, line.text)
        elif isinstance(line, protocol.Progress):
            self._fraction, self._stage = line.fraction, line.stage
            self._write_progress(force=False)
        elif isinstance(line, protocol.Checkpoint):
            self._checkpoint = line.state
            self._write_progress(force=True)
        elif self.spec.context_mode:
            document = dict(line.progress)
            document.pop("updated_at", None)
            done = document.pop("done", None)
            total = document.pop("total", None)
            self.ctx.report_progress(done, total, force=line.force, **document)
        else:
            self.tail.add(text[: protocol.LINE_MAX_CHARS])

    def _write_progress(self, *, force: bool) -> None:
        extra: dict[str, Any] = {"stage": self._stage}
        if self._checkpoint is not None:
            extra["checkpoint"] = self._checkpoint
        self._unwritten = not self.ctx.report_progress(self._fraction, 1, force=force, **extra)

    # -- the outcome ----------------------------------------------------------------------------
    def _outcome(self, returncode: int, stopped_for: str | None) -> dict[str, Any]:
        tail = self.tail.text()
        exit_text = protocol.describe_exit(returncode)
        if stopped_for == "cancelled":
            raise JobCancelled(f"{self.ctx.cancel_message or 'cancelled'} (child {exit_text})")
        if stopped_for == "timeout":
            assert self.spec.timeout_s is not None
            summary = f"timed out after {self.spec.timeout_s:g} s (child {exit_text})"
            raise JobTimeout(summary + (f"\n--- stderr (last lines) ---\n{tail}" if tail else ""))
        if returncode != protocol.EXIT_OK:
            summary = exit_text
            reported = self._failure_report()
            if reported:
                summary = f"{reported} ({exit_text})"
            if returncode == protocol.EXIT_RETRYABLE:
                raise protocol.ChildRetryable(summary, tail, returncode=returncode)
            raise protocol.ChildFailed(summary, tail, returncode=returncode)
        if self.stdout_overflow:
            raise protocol.ChildFailed(
                f"the report on stdout is larger than {protocol.REPORT_MAX_BYTES} bytes", tail
            )
        try:
            return protocol.parse_report(bytes(self.stdout))
        except protocol.ProtocolError as error:
            raise protocol.ChildFailed(str(error), tail, returncode=returncode) from None

    def _failure_report(self) -> str:
        """The ``error`` a failing child may still write on stdout (optional)."""
        try:
            report = protocol.parse_report(bytes(self.stdout))
        except protocol.ProtocolError:
            return ""
        error = report.get("error")
        return str(error).strip().splitlines()[0][:300] if error else ""


def _kill_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def clean_environment(
    allowed: Sequence[str] = (),
    values: Mapping[str, str] | None = None,
    *,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A child's environment: ``PATH`` (and the locale), the names in ``allowed`` copied from
    ``source`` (the worker's environment) when set there, then ``values``."""
    source = os.environ if source is None else source
    env = {"PATH": source.get("PATH", os.defpath)}
    for name in ("LANG", "LC_ALL"):
        if name in source:
            env[name] = source[name]
    for name in allowed:
        if name in source:
            env[name] = source[name]
    env.update(values or {})
    return env
