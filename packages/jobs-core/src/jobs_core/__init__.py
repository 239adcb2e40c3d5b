"""jobs-core: the pure domain of the jobs system.

It imports nothing outside the standard library: no SQL, no HTTP, no dependency injection.

The names below are imported from their modules when first used (``from jobs_core import Job``
imports :mod:`jobs_core.domain` and what it needs, not the in-memory store, the use cases or the
handler's context): a process imports the parts of the core it uses, nothing more (a read
command of the CLI imports none of those three, decision 0049).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs_core.lazy import lazy_names

if TYPE_CHECKING:
    from jobs_core.clock import FakeClock, SystemClock, uuid7
    from jobs_core.context import JobContext
    from jobs_core.domain import (
        ACTIVE,
        FINISHED,
        MAX_ATTEMPTS_EXCEEDED,
        AttemptRef,
        Cancelled,
        CancelReason,
        DedupScope,
        Done,
        Failed,
        Job,
        NewJob,
        Outcome,
        Requeue,
        Status,
        Wait,
    )
    from jobs_core.errors import (
        DedupConflict,
        DedupKeyOwned,
        DocumentTooLarge,
        DuplicateJobType,
        InvalidTransition,
        JobCancelled,
        JobNotFound,
        JobsError,
        JobTimeout,
        PayloadInvalid,
        Snooze,
        StoreRefused,
        StoreUnavailable,
        UnknownJobType,
        WaitForChildren,
    )
    from jobs_core.flow import FlowLimit, KeyScope
    from jobs_core.memory import InMemoryJobStore, InMemoryWakeup
    from jobs_core.ports import Clock, JobFilter, JobStore, Wakeup
    from jobs_core.registry import Handler, JobType, PayloadSchema, Registry
    from jobs_core.retry import RetryPolicy, constant, exponential, jitter
    from jobs_core.service import Enqueued, JobService, SweepReport
    from jobs_core.wait_service import AwaitedSummary, Batch
    from jobs_core.waits import Awaited, DependencyInvalid, WaitRule

__all__ = [
    "ACTIVE",
    "FINISHED",
    "MAX_ATTEMPTS_EXCEEDED",
    "AttemptRef",
    "Awaited",
    "AwaitedSummary",
    "Batch",
    "CancelReason",
    "Cancelled",
    "Clock",
    "DedupConflict",
    "DedupKeyOwned",
    "DedupScope",
    "DependencyInvalid",
    "DocumentTooLarge",
    "Done",
    "DuplicateJobType",
    "Enqueued",
    "Failed",
    "FakeClock",
    "FlowLimit",
    "Handler",
    "InMemoryJobStore",
    "InMemoryWakeup",
    "InvalidTransition",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobFilter",
    "JobNotFound",
    "JobService",
    "JobStore",
    "JobTimeout",
    "JobType",
    "JobsError",
    "KeyScope",
    "NewJob",
    "Outcome",
    "PayloadInvalid",
    "PayloadSchema",
    "Registry",
    "Requeue",
    "RetryPolicy",
    "Snooze",
    "Status",
    "StoreRefused",
    "StoreUnavailable",
    "SweepReport",
    "SystemClock",
    "UnknownJobType",
    "Wait",
    "WaitForChildren",
    "WaitRule",
    "Wakeup",
    "constant",
    "exponential",
    "jitter",
    "uuid7",
]

_HOMES = {
    "FakeClock": "jobs_core.clock",
    "SystemClock": "jobs_core.clock",
    "uuid7": "jobs_core.clock",
    "JobContext": "jobs_core.context",
    "ACTIVE": "jobs_core.domain",
    "AttemptRef": "jobs_core.domain",
    "CancelReason": "jobs_core.domain",
    "Cancelled": "jobs_core.domain",
    "DedupScope": "jobs_core.domain",
    "Done": "jobs_core.domain",
    "FINISHED": "jobs_core.domain",
    "Failed": "jobs_core.domain",
    "Job": "jobs_core.domain",
    "MAX_ATTEMPTS_EXCEEDED": "jobs_core.domain",
    "NewJob": "jobs_core.domain",
    "Outcome": "jobs_core.domain",
    "Requeue": "jobs_core.domain",
    "Status": "jobs_core.domain",
    "Wait": "jobs_core.domain",
    "DedupConflict": "jobs_core.errors",
    "DedupKeyOwned": "jobs_core.errors",
    "DocumentTooLarge": "jobs_core.errors",
    "DuplicateJobType": "jobs_core.errors",
    "InvalidTransition": "jobs_core.errors",
    "JobCancelled": "jobs_core.errors",
    "JobNotFound": "jobs_core.errors",
    "JobTimeout": "jobs_core.errors",
    "JobsError": "jobs_core.errors",
    "PayloadInvalid": "jobs_core.errors",
    "Snooze": "jobs_core.errors",
    "StoreRefused": "jobs_core.errors",
    "StoreUnavailable": "jobs_core.errors",
    "UnknownJobType": "jobs_core.errors",
    "WaitForChildren": "jobs_core.errors",
    "FlowLimit": "jobs_core.flow",
    "KeyScope": "jobs_core.flow",
    "InMemoryJobStore": "jobs_core.memory",
    "InMemoryWakeup": "jobs_core.memory",
    "Clock": "jobs_core.ports",
    "JobFilter": "jobs_core.ports",
    "JobStore": "jobs_core.ports",
    "Wakeup": "jobs_core.ports",
    "Handler": "jobs_core.registry",
    "JobType": "jobs_core.registry",
    "PayloadSchema": "jobs_core.registry",
    "Registry": "jobs_core.registry",
    "RetryPolicy": "jobs_core.retry",
    "constant": "jobs_core.retry",
    "exponential": "jobs_core.retry",
    "jitter": "jobs_core.retry",
    "Enqueued": "jobs_core.service",
    "JobService": "jobs_core.service",
    "SweepReport": "jobs_core.service",
    "AwaitedSummary": "jobs_core.wait_service",
    "Batch": "jobs_core.wait_service",
    "Awaited": "jobs_core.waits",
    "DependencyInvalid": "jobs_core.waits",
    "WaitRule": "jobs_core.waits",
}
"""The module each name of :data:`__all__` lives in."""


__getattr__ = lazy_names(__name__, _HOMES, globals())
