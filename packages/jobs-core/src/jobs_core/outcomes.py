"""The outcomes of an attempt, as data: what a handler's run comes to (:class:`Done`,
:class:`Failed`, :class:`Cancelled`, :class:`Requeue`, :class:`Wait`), and the heartbeat a
progress document carries. :mod:`jobs_core.domain` turns an outcome into the job's next state."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobs_core.domain import NewJob

# ---- outcomes of an attempt -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """The handler returned: the job is done with this report. ``children``: the jobs it
    enqueued with ``ctx.enqueue`` (written with this outcome, decision 0038)."""

    report: Mapping[str, Any] | None = None
    children: tuple[NewJob, ...] = ()


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed definitively: short ``error``, details in ``report``."""

    error: str
    report: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The handler stopped on a cancellation request."""

    report: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Requeue:
    """Put the job back in the queue to run again at ``run_at`` (retryable error, or sweep).

    ``refund_attempt``: the attempt is handed back unfinished by a worker that is shutting down,
    so it does not count against ``max_attempts`` (``attempts`` goes back down by one).
    ``snooze``: the handler asked to run again later (an upstream said "not now"); the attempt is
    refunded and ``snoozes`` counts one more.
    """

    run_at: datetime
    error: str | None = None
    report: Mapping[str, Any] | None = None
    refund_attempt: bool = False
    snooze: bool = False


@dataclass(frozen=True, slots=True)
class Wait:
    """The handler waits for its children (``ctx.wait_for_children()``, decision 0043): the job
    goes ``waiting`` without a slot until the children of this attempt have all ended — those
    held (``children``, written with this outcome) and those enqueued at once (``awaits``, their
    ids) — then runs again. The attempt is handed back, as a snooze's is."""

    report: Mapping[str, Any] | None = None
    children: tuple[NewJob, ...] = ()
    awaits: tuple[uuid.UUID, ...] = ()


Outcome = Done | Failed | Cancelled | Requeue | Wait


def heartbeat_progress(progress: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """``progress`` with its conventional ``updated_at`` key set to ``now``."""
    merged = dict(progress or {})
    merged["updated_at"] = now.isoformat()
    return merged


def parse_heartbeat(progress: Mapping[str, Any] | None) -> datetime | None:
    """The ``updated_at`` of a progress document, if it holds a valid timestamp."""
    if not progress:
        return None
    raw = progress.get("updated_at")
    if not isinstance(raw, str):
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
