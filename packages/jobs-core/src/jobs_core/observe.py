"""What the use cases tell an observer (issue 24: the metrics of the apps): the port
:class:`Observer`, and :class:`NoObserver`, the default, which does nothing.

:class:`jobs_core.JobService` calls it after a store call returned, in the caller's thread,
with what the call already gave back: no store call, no lock and nothing per job beyond
reading the returned rows. An observer must be cheap and must not raise (a metrics library's
counters and histograms are). The apps plug in a Prometheus one (``jobs_api.metrics``,
``jobs_worker.metrics``; docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from jobs_core.domain import Job, Status
from jobs_core.history import Ended

ACTIVE_STATES = ("queued", "scheduled", "running", "waiting")
"""What an operator counts among live jobs (``OperatorReads.active_counts``, the gauges)."""


def active_state(job: Job, now: datetime) -> str | None:
    """``running``; ``queued`` when due (``run_at <= now``); ``scheduled`` when queued for
    later (a ``run_at``, a retry's backoff, a snooze); ``waiting`` for other jobs to end; None
    for a finished job."""
    if job.status is Status.RUNNING:
        return "running"
    if job.status is Status.WAITING:
        return "waiting"
    if job.status is Status.QUEUED:
        return "scheduled" if job.run_at > now else "queued"
    return None


class Observer(Protocol):
    """Told of the enqueues, claims and ends of attempts the use cases made."""

    def enqueued(self, jobs: Sequence[Job]) -> None:
        """``jobs`` were created (a job found by its dedup key is not)."""
        ...

    def claimed(self, jobs: Sequence[Job], seconds: float | None) -> None:
        """``jobs`` were claimed; ``seconds``: the claim's round trip, None when the claim rode
        on a finish's round trip (counted by :meth:`finished`)."""
        ...

    def finished(self, ended: Sequence[Ended], seconds: float | None) -> None:
        """Attempts ended (each with its job's type, outcome and run time; only the writes that
        applied); ``seconds``: the round trip of the write (with the claim it carried), None for the
        sweep's writes."""
        ...

    def outage_began(self) -> None:
        """A caller's store calls began failing as an outage (``is_outage``)."""
        ...


class NoObserver:
    """The observer of a service nobody watches."""

    def enqueued(self, jobs: Sequence[Job]) -> None:
        """Nothing."""

    def claimed(self, jobs: Sequence[Job], seconds: float | None) -> None:
        """Nothing."""

    def finished(self, ended: Sequence[Ended], seconds: float | None) -> None:
        """Nothing."""

    def outage_began(self) -> None:
        """Nothing."""
