"""``python -m jobs_worker.isolated``: the child side of an isolated Python handler.

Reads the stdin document (docs/subprocess-protocol.md), rebuilds the worker's registries from
its ``isolation`` recipe, runs the type's handler once through :func:`jobs_core.runner.execute`
and reports the outcome by its exit status (see :mod:`jobs_worker.isolation`). Not meant to be
run by hand.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
import traceback
import uuid
from collections.abc import Mapping
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from jobs_core import (
    Cancelled,
    CancelReason,
    Done,
    Job,
    JobContext,
    Registry,
    Requeue,
    Status,
    Wait,
)
from jobs_core.protocol import EXIT_RETRYABLE, format_context
from jobs_core.runner import execute

from jobs_worker.isolation import ISOLATION_KEY
from jobs_worker.registries import worker_registry

EXIT_FAILED = 1

_stderr_lock = threading.Lock()


def _emit(line: str) -> None:
    with _stderr_lock:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _now() -> datetime:
    return datetime.now(UTC)


def _job(document: Mapping[str, Any]) -> Job:
    now = _now()
    checkpoint = document.get("checkpoint")
    return Job(
        id=uuid.UUID(str(document["job_id"])),
        org_id=str(document["org"]),
        type=str(document["type"]),
        status=Status.RUNNING,
        payload=dict(document.get("payload") or {}),
        created_at=now,
        run_at=now,
        attempts=int(document.get("attempt", 1)),
        max_attempts=int(document.get("max_attempts", 1)),
        progress=dict(checkpoint) if isinstance(checkpoint, Mapping) else None,
        started_at=now,
        lease=uuid.UUID(str(document["lease"])) if document.get("lease") else None,
    )


def _registry(recipe: Mapping[str, Any], stack: ExitStack) -> Registry:
    """The worker's registry, rebuilt: the same modules (``JOBS_MODULES`` as the worker read
    it), the same extra registries and manifests, on an engine of the child's own."""
    from jobs_core.modules import discover
    from jobs_postgres.modules import opened_context

    demo_types = bool(recipe.get("demo_types"))
    selection = recipe.get("modules")
    modules = discover(tuple(selection) if selection is not None else None, development=demo_types)
    url = recipe.get("database_url") if recipe.get("shipped_modules") else None
    context = stack.enter_context(
        opened_context(str(url) if url else None, Path(recipe.get("data_dir") or ".data"))
    )
    handlers_dir = recipe.get("handlers_dir")
    return worker_registry(
        demo_types,
        list(recipe.get("extra_registries") or []),
        handlers_dir=Path(handlers_dir) if handlers_dir else None,
        context=context,
        modules=modules,
    )


def main() -> int:
    """Run one attempt; the exit status is its outcome."""
    document = json.loads(sys.stdin.readline())
    job = _job(document)

    def sink(progress: Mapping[str, Any]) -> bool:
        document = dict(progress)
        _emit(format_context(document, force=bool(document.pop("__force__", False))))
        return True

    ctx = _ForcingContext(job, progress_sink=sink, now=_now)

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        ctx.cancel(CancelReason.REQUESTED)

    signal.signal(signal.SIGTERM, on_term)
    with ExitStack() as stack:
        registry = _registry(document[ISOLATION_KEY], stack)
        # The worker enforces the timeout (it can kill this process); here, none.
        job_type = dataclasses.replace(registry.get(job.type), timeout_s=None)
        outcome = execute(job_type, ctx, _now)
    if isinstance(outcome, Done):
        print(json.dumps(outcome.report or {}, default=str))
        return 0
    if isinstance(outcome, Cancelled):
        print(json.dumps({"error": "cancelled", **(outcome.report or {})}, default=str))
        return EXIT_FAILED
    if isinstance(outcome, Wait):  # it cannot enqueue children here, so never has any to wait for
        print(json.dumps({"error": "a handler in a child process cannot wait for children"}))
        return EXIT_FAILED
    report = dict(getattr(outcome, "report", None) or {})
    trace = report.pop("traceback", "")
    if trace:
        sys.stderr.write(str(trace))
        sys.stderr.flush()
    print(json.dumps({"error": outcome.error, **report}, default=str))
    return EXIT_RETRYABLE if isinstance(outcome, Requeue) else EXIT_FAILED


class _ForcingContext(JobContext):
    """Passes ``force`` on to the worker, which throttles the writes itself."""

    def report_progress(
        self,
        done: int | float | None = None,
        total: int | float | None = None,
        *,
        force: bool = False,
        **extra: Any,
    ) -> bool:
        if force:
            extra["__force__"] = True
        return super().report_progress(done, total, force=force, **extra)


if __name__ == "__main__":  # pragma: no cover - a process
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(EXIT_FAILED)
