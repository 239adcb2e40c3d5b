"""The exception tree of jobs: every error the library raises derives from :class:`JobsError`.

Adapters translate their driver's errors at the boundary (a unique violation, a lost connection)
into these, so callers never import psycopg or SQLAlchemy to handle a jobs failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class JobsError(Exception):
    """A jobs operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class UnknownJobType(JobsError):
    """No job type of that name is registered."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown job type {name!r}")
        self.name = name


class DuplicateJobType(JobsError):
    """A job type of that name is already registered."""

    def __init__(self, name: str) -> None:
        super().__init__(f"job type {name!r} is already registered")
        self.name = name


class JobNotFound(JobsError):
    """No such job (or it belongs to another organization, which is the same thing)."""


class InvalidTransition(JobsError):
    """The job's current status forbids this change."""

    def __init__(self, job_status: str, action: str, message: str | None = None) -> None:
        super().__init__(message or f"cannot {action} a job that is {job_status}")
        self.job_status = job_status
        self.action = action


class PayloadInvalid(JobsError):
    """The payload does not match the job type's schema."""

    def __init__(self, errors: Sequence[Mapping[str, Any]]) -> None:
        super().__init__("payload rejected: " + "; ".join(str(e.get("msg", e)) for e in errors))
        self.errors: list[Mapping[str, Any]] = list(errors)


class DedupConflict(JobsError):
    """The dedup key is held by another job and could not be resolved."""


class StoreUnavailable(JobsError):
    """The job store cannot be reached (connection lost, server restarting); retry later."""


class StoreRefused(JobsError):
    """The job store refused the data itself: a value too large, malformed or out of range
    (PostgreSQL SQLSTATE class 22 "data exception" or 54 "program limit exceeded").

    Unlike :class:`StoreUnavailable` this is permanent: the same request fails the same way
    on every try, so it is never retried. Callers turn it into a refusal of the request (the
    API answers 422 or 413, an import records a row error, the worker fails the attempt).
    ``sqlstate`` is the server's error code when there is one.
    """

    def __init__(self, message: str | None = None, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class DocumentTooLarge(JobsError):
    """A report or progress document is over :data:`jobs_core.limits.DOCUMENT_MAX_BYTES`."""


class JobCancelled(JobsError):
    """The job was cancelled while it ran."""


class JobTimeout(JobsError):
    """The job ran longer than its type's timeout."""
