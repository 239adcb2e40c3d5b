"""jobs-core: the pure domain of the jobs system.

It imports nothing outside the standard library: no SQL, no HTTP, no dependency injection.
"""

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
