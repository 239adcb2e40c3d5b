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


class DedupKeyOwned(PayloadInvalid):
    """The job type derives its dedup key from the payload; a caller cannot pass another one."""

    def __init__(self, type_name: str, derived: str, given: str) -> None:
        super().__init__(
            [
                {
                    "loc": ["dedup_key"],
                    "msg": (
                        f"job type {type_name!r} derives its dedup key from the payload "
                        f"({derived!r}); omit dedup_key or pass exactly that one (got {given!r})"
                    ),
                    "type": "dedup_key_owned",
                }
            ]
        )
        self.derived = derived
        self.given = given


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


class Snooze(JobsError):
    """Raised by a handler to run again after ``delay_s`` seconds without spending an attempt
    (an upstream answered 429 with Retry-After). Bounded by the type's ``max_snoozes``."""

    def __init__(self, delay_s: float, reason: str = "") -> None:
        if not delay_s >= 0:
            raise ValueError("a snooze delay must be >= 0 seconds")
        super().__init__(reason or f"snoozed for {delay_s:g} s")
        self.delay_s = float(delay_s)
        self.reason = reason


class WaitForChildren(JobsError):
    """Raised by ``ctx.wait_for_children()``: end this attempt ``waiting`` for the children it
    enqueued, without a slot, and run again once they have all ended (decision 0043). The
    attempt is handed back, as a snooze's: it spends no attempt."""

    def __init__(self, report: Mapping[str, Any] | None = None) -> None:
        super().__init__("waiting for its children")
        self.report = report


OUTAGE_ERRORS: tuple[type[BaseException], ...] = (StoreUnavailable, ConnectionError, TimeoutError)
"""Errors that mean "the store is not reachable right now": retry later, the data is fine. An
adapter raises :class:`StoreUnavailable` for its driver's connection failures (docs/worker.md,
"Errors by cause"); the two built-in ones cover a socket error raised outside a driver."""


def is_outage(error: BaseException) -> bool:
    """True when ``error``, or what explicitly caused it (``raise … from``), says the store is
    unreachable. The implicit ``__context__`` is not followed: a bug raised while an outage
    was being handled is still a bug, and retrying it forever would hide it. A
    :class:`StoreRefused` is never one, whatever caused it: the store refused the data, and it
    would refuse it again."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, StoreRefused):
            return False
        if isinstance(current, OUTAGE_ERRORS):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False
