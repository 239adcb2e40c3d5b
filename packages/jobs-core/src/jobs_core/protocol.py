"""The subprocess protocol, its pure parts: what a child handler reads, writes and means.

A child handler is any executable. The worker runs it once per attempt and speaks to it only
through its standard streams and its exit status (docs/subprocess-protocol.md):

- **stdin**: one JSON line, :func:`stdin_document` (job id, org, type, attempt, params, the last
  checkpoint of an earlier attempt, a scratch directory), then EOF;
- **stderr**: ``PROGRESS:<fraction> <stage>`` lines (fraction 0..1), ``CHECKPOINT:<json object>``
  lines, and anything else (kept as a bounded tail for the report and the worker's log);
- **stdout**: one JSON object, the job's report, written before exit;
- **exit status**: 0 with a valid report is success; :data:`EXIT_RETRYABLE` (75, ``EX_TEMPFAIL``)
  asks for another attempt under the type's retry policy; any other code, a death by signal or
  an invalid report fails the attempt.

This module parses and interprets; :mod:`jobs_worker.child` runs the processes.
"""

from __future__ import annotations

import json
import math
import signal
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs_core.domain import Job

PROTOCOL_VERSION = 1

PROGRESS_PREFIX = "PROGRESS:"
CHECKPOINT_PREFIX = "CHECKPOINT:"
CONTEXT_PREFIX = "JOBCTX:"
"""Internal to isolated Python handlers: a whole :class:`~jobs_core.JobContext` progress write."""

EXIT_OK = 0
EXIT_RETRYABLE = 75
"""``EX_TEMPFAIL`` of sysexits.h: a temporary failure, worth another attempt."""

STAGE_MAX_CHARS = 200
LINE_MAX_CHARS = 1000
TAIL_LINES = 40
REPORT_MAX_BYTES = 1_048_576
CHECKPOINT_MAX_BYTES = 65_536


class ProtocolError(ValueError):
    """A line or a document that breaks the protocol (the message says what was expected)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """A ``PROGRESS:<fraction> <stage>`` line."""

    fraction: float
    stage: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A ``CHECKPOINT:<json object>`` line: state the next attempt receives back."""

    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ContextWrite:
    """A ``JOBCTX:{"progress": {...}, "force": bool}`` line of an isolated Python handler."""

    progress: dict[str, Any]
    force: bool


@dataclass(frozen=True, slots=True)
class Text:
    """Any other stderr line: kept in the tail."""

    text: str


Line = Progress | Checkpoint | ContextWrite | Text


def parse_line(raw: str) -> Line:
    """Classify one stderr line (without its newline). A line that starts like a protocol line
    but is malformed raises :class:`ProtocolError`; the caller keeps it as text and logs why."""
    line = raw.rstrip("\r\n")
    if line.startswith(PROGRESS_PREFIX):
        return parse_progress(line[len(PROGRESS_PREFIX) :])
    if line.startswith(CHECKPOINT_PREFIX):
        state = _json_object(line[len(CHECKPOINT_PREFIX) :], "CHECKPOINT:")
        if len(line) > CHECKPOINT_MAX_BYTES:
            raise ProtocolError(f"CHECKPOINT: larger than {CHECKPOINT_MAX_BYTES} bytes")
        return Checkpoint(state)
    if line.startswith(CONTEXT_PREFIX):
        document = _json_object(line[len(CONTEXT_PREFIX) :], "JOBCTX:")
        progress = document.get("progress")
        if not isinstance(progress, dict):
            raise ProtocolError('JOBCTX: expected {"progress": {...}, "force": bool}')
        return ContextWrite(progress, bool(document.get("force", False)))
    return Text(line[:LINE_MAX_CHARS])


def parse_progress(rest: str) -> Progress:
    """``<fraction> <stage>``: a number in [0, 1], then an optional free-text stage."""
    number, _, stage = rest.strip().partition(" ")
    try:
        fraction = float(number)
    except ValueError:
        raise ProtocolError(
            f"PROGRESS: expected 'PROGRESS:<0..1> <stage>', got {rest[:60]!r}"
        ) from None
    if not math.isfinite(fraction) or not 0.0 <= fraction <= 1.0:
        raise ProtocolError(f"PROGRESS: the fraction must be within 0..1, got {number!r}")
    return Progress(fraction, stage.strip()[:STAGE_MAX_CHARS])


def format_checkpoint(state: Mapping[str, Any]) -> str:
    """A ``CHECKPOINT:`` line for ``state`` (one line of compact JSON)."""
    return CHECKPOINT_PREFIX + json.dumps(dict(state), separators=(",", ":"), allow_nan=False)


def format_context(progress: Mapping[str, Any], force: bool) -> str:
    """A ``JOBCTX:`` line (isolated Python handlers)."""
    document = {"progress": dict(progress), "force": force}
    return CONTEXT_PREFIX + json.dumps(document, separators=(",", ":"), default=str)


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ProtocolError(f"{what} expected one JSON object on the line: {error}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} expected a JSON object, got {type(value).__name__}")
    return value


def stdin_document(
    job: Job, params: Mapping[str, Any], checkpoint: Mapping[str, Any] | None, scratch_dir: str
) -> dict[str, Any]:
    """What the child reads on stdin, as one JSON line.

    ``params`` is the validated payload (the manifest's parameters with their defaults filled);
    ``payload`` carries the same object under the name the rest of the system uses.
    """
    return {
        "protocol": PROTOCOL_VERSION,
        "job_id": str(job.id),
        "org": job.org_id,
        "type": job.type,
        "attempt": job.attempts,
        "max_attempts": job.max_attempts,
        "params": dict(params),
        "payload": dict(params),
        "checkpoint": dict(checkpoint) if checkpoint is not None else None,
        "scratch_dir": scratch_dir,
    }


def encode_stdin(document: Mapping[str, Any]) -> bytes:
    """One line of JSON and a newline."""
    return (json.dumps(dict(document), separators=(",", ":"), default=str) + "\n").encode()


def checkpoint_of(progress: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The checkpoint a child saved in an earlier attempt (kept under ``checkpoint`` in the
    job's progress document), or None."""
    if not progress:
        return None
    state = progress.get("checkpoint")
    return dict(state) if isinstance(state, Mapping) else None


def parse_report(stdout: bytes) -> dict[str, Any]:
    """The report: exactly one JSON object on stdout (surrounding whitespace allowed)."""
    if len(stdout) > REPORT_MAX_BYTES:
        raise ProtocolError(f"the report on stdout is larger than {REPORT_MAX_BYTES} bytes")
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        raise ProtocolError("exit 0 without a report: stdout must hold one JSON object")
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ProtocolError(f"the report on stdout is not one JSON object: {error}") from None
    if not isinstance(value, dict):
        raise ProtocolError(
            f"the report on stdout must be a JSON object, not {type(value).__name__}"
        )
    return value


def describe_exit(returncode: int) -> str:
    """``exited with code 3`` or ``killed by signal SIGSEGV`` (Popen gives -N for signal N)."""
    if returncode < 0:
        return f"killed by signal {signal_name(-returncode)}"
    return f"exited with code {returncode}"


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; ``signal 99`` for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class StderrTail:
    """The last ``limit`` non-protocol lines of a child's stderr."""

    def __init__(self, limit: int = TAIL_LINES) -> None:
        self._lines: deque[str] = deque(maxlen=limit)
        self.dropped = 0

    def add(self, line: str) -> None:
        if len(self._lines) == self._lines.maxlen:
            self.dropped += 1
        self._lines.append(line)

    def lines(self) -> list[str]:
        return list(self._lines)

    def text(self) -> str:
        head = f"[{self.dropped} earlier lines dropped]\n" if self.dropped else ""
        return head + "\n".join(self._lines)


class ChildFailed(Exception):
    """The child's attempt failed: a non-zero exit, a signal, or a broken protocol. The first
    line of the message is the job's error; the rest is the stderr tail."""

    def __init__(self, summary: str, tail: str = "", *, returncode: int | None = None) -> None:
        message = summary if not tail else f"{summary}\n--- stderr (last lines) ---\n{tail}"
        super().__init__(message)
        self.summary = summary
        self.tail = tail
        self.returncode = returncode


class ChildRetryable(ChildFailed):
    """The child exited with :data:`EXIT_RETRYABLE`: another attempt may succeed."""
