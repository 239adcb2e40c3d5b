"""Plain-text rendering of jobs: tables, progress bars and durations.

Everything here is a pure function of a :class:`~jobs_core.Job` and an instant, so the output is the
same with or without a TTY (no colours, no cursor movement) and can be tested without a database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobs_core.domain import Job, Status

if TYPE_CHECKING:  # types only: `jobs ls` imports no more of the core than it uses
    from jobs_core.history import AttemptRecord
    from jobs_core.listing import ChildCounts
    from jobs_core.waiting import WaitReason

BAR_WIDTH = 10
ERROR_WIDTH = 48


def human_duration(seconds: float) -> str:
    """A short duration: ``850ms``, ``42s``, ``3m05s``, ``2h07m``, ``4d03h``."""
    if seconds < 0:
        seconds = 0.0
    if seconds < 1:
        return f"{int(seconds * 1000)}ms"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def _number(value: Any) -> float | None:
    # bool is an int subclass; a progress of True/False is not a count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def progress_fraction(progress: Mapping[str, Any] | None) -> float | None:
    """``done / total`` clamped to [0, 1], or None when the job reports no usable counts."""
    if not progress:
        return None
    done, total = _number(progress.get("done")), _number(progress.get("total"))
    if done is None or total is None or total <= 0:
        return None
    return min(max(done / total, 0.0), 1.0)


def _count(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def progress_cell(job: Job) -> str:
    """``[#####-----]  50%`` from ``progress.done/total``; ``100%`` once done; else the count."""
    fraction = progress_fraction(job.progress)
    if fraction is None and job.status is Status.DONE:
        fraction = 1.0
    if fraction is not None:
        filled = int(fraction * BAR_WIDTH)  # never draw more than is done
        return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {round(fraction * 100):3d}%"
    done = _number((job.progress or {}).get("done"))
    return f"{_count(done)} done" if done is not None else ""


def age(job: Job, now: datetime) -> str:
    """How long ago the job was created."""
    return human_duration((now - job.created_at).total_seconds())


def run_time(job: Job, now: datetime) -> str:
    """How long the last attempt ran (still running: so far); empty if it never started."""
    if job.started_at is None:
        if job.status is Status.QUEUED and job.run_at > now:
            return "in " + human_duration((job.run_at - now).total_seconds())
        return ""
    end = job.finished_at or (now if job.status is Status.RUNNING else None)
    if end is None:
        return ""
    return human_duration((end - job.started_at).total_seconds())


def _one_line(text: str | None, width: int) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def status_cell(job: Job) -> str:
    """The status, marked when a running job was asked to stop."""
    if job.status is Status.RUNNING and job.cancel_requested_at is not None:
        return "running (cancelling)"
    return str(job.status)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks stripped."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *rows]
    ]
    return "\n".join(lines)


def jobs_table(jobs: Sequence[Job], now: datetime, *, with_org: bool = False) -> str:
    """The ``jobs ls`` table, newest first as given."""
    headers = ["ID", "TYPE", "STATUS", "PRIO", "PROGRESS", "ATTEMPTS", "AGE", "RAN", "ERROR"]
    if with_org:
        headers.insert(1, "ORG")
    rows = []
    for job in jobs:
        row = [
            str(job.id),
            job.type,
            status_cell(job),
            str(job.priority),
            progress_cell(job),
            f"{job.attempts}/{job.max_attempts}",
            age(job, now),
            run_time(job, now),
            _one_line(job.error, ERROR_WIDTH),
        ]
        if with_org:
            row.insert(1, job.org_id)
        rows.append(row)
    return table(headers, rows)


def _instant(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "-"
    delta = (now - value).total_seconds()
    when = "ago" if delta >= 0 else "from now"
    return f"{value.isoformat(timespec='seconds')} ({human_duration(abs(delta))} {when})"


def _document(value: Mapping[str, Any] | None) -> str:
    if value is None:
        return "-"
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def job_details(
    job: Job,
    now: datetime,
    waiting: Sequence[WaitReason] = (),
    attempts: Sequence[AttemptRecord] = (),
    children: ChildCounts | None = None,
) -> str:
    """The ``jobs show`` view: one field per line (why a queued job waits among them, how many
    of its children ended), the JSON documents, then each attempt; a traceback is printed as
    the text it is, never as a JSON string."""
    progress = progress_cell(job)
    fields = [
        ("id", str(job.id)),
        ("org", job.org_id),
        ("type", job.type),
        ("status", status_cell(job)),
        ("progress", progress or "-"),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("priority", str(job.priority)),
        ("snoozes", str(job.snoozes)),
        ("parent", str(job.parent_id) if job.parent_id is not None else "-"),
        ("children", "-" if children is None else f"{children.ended} of {children.total} ended"),
        ("created", _instant(job.created_at, now)),
        ("run at", _instant(job.run_at, now)),
        ("started", _instant(job.started_at, now)),
        ("finished", _instant(job.finished_at, now)),
        ("ran", run_time(job, now) or "-"),
        ("dedup key", job.requested_dedup_key or "-"),
        ("error", job.error or "-"),
    ]
    if job.cancel_requested_at is not None:
        fields.append(("cancel asked", _instant(job.cancel_requested_at, now)))
    fields.extend(("waiting" if i == 0 else "", r.message) for i, r in enumerate(waiting))
    width = max(len(name) for name, _ in fields)
    lines = [f"{name.ljust(width)}  {value}" for name, value in fields]
    report, traceback = _split_traceback(job.report)
    for name, document in (
        ("payload", job.payload),
        ("progress data", job.progress),
        ("report", report),
    ):
        lines.append(f"{name}:")
        lines.extend("  " + line for line in _document(document).splitlines())
    shown = {record.traceback for record in attempts}
    if traceback is not None and traceback not in shown:
        lines.append("traceback:")
        lines.extend("  " + line for line in traceback.splitlines())
    if attempts:
        lines.append("attempts:")
        lines.extend(attempt_lines(attempts, now))
    return "\n".join(lines)


def _split_traceback(
    report: Mapping[str, Any] | None,
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The report without its ``traceback`` text, and that text (None when it has none)."""
    if report is None or not isinstance(report.get("traceback"), str):
        return report, None
    rest = {key: value for key, value in report.items() if key != "traceback"}
    return rest, str(report["traceback"])


def attempt_lines(attempts: Sequence[AttemptRecord], now: datetime) -> list[str]:
    """One line per attempt (number, outcome, start, duration, worker, error), its traceback
    under it as text."""
    lines = []
    for record in attempts:
        worker = record.worker or "worker unknown"
        line = (
            f"  #{record.attempt} {record.outcome.value:<11} "
            f"{_instant(record.started_at, now)}  ran {human_duration(record.duration_s)}  "
            f"{worker}"
        )
        lines.append(line + (f"  {record.error}" if record.error else ""))
        if record.traceback:
            lines.extend("      " + text for text in record.traceback.splitlines())
    return lines


def attempts_json(attempts: Sequence[AttemptRecord]) -> list[dict[str, Any]]:
    """The attempts as ``GET /jobs/{id}`` shows them (``attempt_history``)."""
    return [
        {
            "attempt": r.attempt,
            "started_at": r.started_at.isoformat(),
            "ended_at": r.ended_at.isoformat(),
            "duration_s": r.duration_s,
            "worker": r.worker,
            "outcome": r.outcome.value,
            "error": r.error,
            "traceback": r.traceback,
        }
        for r in attempts
    ]


def job_json(job: Job) -> dict[str, Any]:
    """The job as the HTTP API shows it (plus ``org_id``), for ``--json`` output."""

    def iso(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "id": str(job.id),
        "org_id": job.org_id,
        "type": job.type,
        "status": str(job.status),
        "payload": dict(job.payload),
        "progress": None if job.progress is None else dict(job.progress),
        "report": None if job.report is None else dict(job.report),
        "error": job.error,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "snoozes": job.snoozes,
        "parent_id": None if job.parent_id is None else str(job.parent_id),
        "dedup_key": job.requested_dedup_key,
        "created_at": iso(job.created_at),
        "run_at": iso(job.run_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "cancel_requested_at": iso(job.cancel_requested_at),
    }
