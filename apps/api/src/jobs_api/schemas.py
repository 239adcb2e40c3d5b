"""The HTTP representations: request and response bodies, and the opaque list cursor."""

from __future__ import annotations

import base64
import binascii
import enum
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobs_core import ACTIVE, FINISHED, Job, Status
from jobs_core.domain import PRIORITY_MAX, PRIORITY_MIN
from jobs_core.history import AttemptOutcome, AttemptRecord
from jobs_core.listing import ChildCounts, Elided, elided_fields
from jobs_core.waiting import WaitReason
from jobs_core.waits import MAX_DEPENDENCIES
from pydantic import BaseModel, ConfigDict, Field


class WaitingOut(BaseModel):
    """One reason a queued job has not started (docs/flow-control.md): a stable ``code``
    (awaiting, scheduled, snoozed, type_paused, key_busy, rate_limited, type_busy, ahead,
    no_worker, unknown_type, next) and a sentence."""

    code: str
    message: str


class AttemptOut(BaseModel):
    """One attempt of a job (jobs_core.history): ``attempt`` numbers every run in the order they
    ended (1 first); ``outcome`` is what became of that run: done, failed, cancelled, retrying
    (failed, the job runs again), snoozed, handed_back (its worker shut down), lost (its worker
    went silent; the sweep ended it), waiting (its handler waited for its children). ``worker``
    is ``host:pid``, null when unknown.
    ``traceback``: the handler's frames, when the run raised."""

    attempt: int
    started_at: datetime
    ended_at: datetime
    duration_s: float
    worker: str | None
    outcome: AttemptOutcome
    error: str | None
    traceback: str | None

    @classmethod
    def of(cls, record: AttemptRecord) -> AttemptOut:
        """The representation of a domain record."""
        return cls(
            attempt=record.attempt,
            started_at=record.started_at,
            ended_at=record.ended_at,
            duration_s=record.duration_s,
            worker=record.worker,
            outcome=record.outcome,
            error=record.error,
            traceback=record.traceback,
        )


class ChildrenOut(BaseModel):
    """A parent's children (the jobs its handler enqueued, ``ctx.enqueue``): how many it has
    and how many of them have ended (done, failed or cancelled)."""

    total: int
    ended: int

    @classmethod
    def of(cls, counts: ChildCounts | None) -> ChildrenOut | None:
        """The representation of the store's counts (None for a job with no child)."""
        return None if counts is None else cls(total=counts.total, ended=counts.ended)


class JobOut(BaseModel):
    """A job as an org sees it: the fields of docs/contract.md §8 plus its attempt and scheduling
    state.

    ``payload`` is the job's payload as its type's schema normalized it (what a person needs to
    tell jobs of one type apart). ``dedup_key`` is the key the job was enqueued with (kept after
    the key is released, so a client recognises its job). The worker's ``lease`` and the
    ``org_id`` are never shown. In a list (``GET /jobs``), a payload, progress or report whose
    JSON is larger than ``JOBS_LIST_FIELD_BYTES`` is null and named in ``truncated``.
    """

    id: uuid.UUID
    type: str
    payload: dict[str, Any] | None = Field(
        description="null only in a list, when named in `truncated`: read it at GET /jobs/{id}."
    )
    status: Status
    progress: dict[str, Any] | None
    report: dict[str, Any] | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    max_attempts: int
    run_at: datetime
    dedup_key: str | None
    cancel_requested_at: datetime | None
    priority: int = 0
    snoozes: int = 0
    parent_id: uuid.UUID | None = Field(
        default=None,
        description="The job whose handler enqueued this one (ctx.enqueue); null for any other.",
    )
    children: ChildrenOut | None = Field(
        default=None,
        description=(
            "In a list (GET /jobs) and a job read alone: its children and how many have "
            "ended; null for a job with none (and in an event). List them with "
            "GET /jobs?parent_id=."
        ),
    )
    waiting: list[WaitingOut] | None = Field(
        default=None,
        description="For a queued job read alone (GET /jobs/{id}): why it has not started yet.",
    )
    attempt_history: list[AttemptOut] | None = Field(
        default=None,
        description=(
            "For a job read alone (GET /jobs/{id}): every ended attempt, oldest first (null in "
            "a list). `attempts` stays the count the retry budget spends."
        ),
    )
    truncated: list[str] = Field(
        default_factory=list,
        description=(
            "The fields (`payload`, `progress`, `report`) left out of this list, null here "
            "because their JSON is larger than JOBS_LIST_FIELD_BYTES: GET /jobs/{id} has them."
        ),
    )

    @classmethod
    def of(
        cls,
        job: Job,
        waiting: list[WaitReason] | None = None,
        history: list[AttemptRecord] | None = None,
        children: ChildCounts | None = None,
    ) -> JobOut:
        """The representation of a domain job (with why it waits, its attempts and its
        children's counts, when given)."""
        left_out = elided_fields(job)
        return cls(
            id=job.id,
            type=job.type,
            payload=_whole(job.payload),
            status=job.status,
            progress=_whole(job.progress),
            report=_whole(job.report),
            error=job.error,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            run_at=job.run_at,
            dedup_key=job.requested_dedup_key,
            cancel_requested_at=job.cancel_requested_at,
            priority=job.priority,
            snoozes=job.snoozes,
            parent_id=job.parent_id,
            children=ChildrenOut.of(children),
            waiting=None
            if waiting is None
            else [WaitingOut(code=r.code, message=r.message) for r in waiting],
            attempt_history=None if history is None else [AttemptOut.of(r) for r in history],
            truncated=left_out,
        )


def _whole(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A job's document as shown: None when absent or left out of a list (``Elided``)."""
    return None if value is None or isinstance(value, Elided) else dict(value)


class EnqueueIn(BaseModel):
    """``POST /jobs``: which public job type to run, with what payload."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=100, examples=["noop"])
    payload: dict[str, Any] = Field(
        default_factory=dict, description="Validated by the job type's schema."
    )
    dedup_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        pattern=r"^[^\x00]+$",
        description=(
            "While a job of the org holds this key, enqueueing returns that job (200). A type "
            "that derives its key from the payload refuses a different one (422)."
        ),
    )
    priority: int = Field(
        default=0,
        ge=PRIORITY_MIN,
        le=PRIORITY_MAX,
        description=f"Higher runs first ({PRIORITY_MIN} to {PRIORITY_MAX}; default 0).",
    )
    depends_on: list[uuid.UUID] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_DEPENDENCIES,
        description=(
            "Ids of the org's jobs this one waits for (status `waiting`, never claimed until "
            "they have all ended; docs/flows.md). One that ends failed or cancelled cancels "
            'this job, unless its type declares `after_failed_dependency="run"`. A '
            f"dependent job is never deduplicated into another (409). At most {MAX_DEPENDENCIES}."
        ),
    )


class JobPage(BaseModel):
    """A page of jobs, newest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[JobOut]
    next_cursor: str | None


class JobStats(BaseModel):
    """Job counts of the org per status; ``active`` = waiting + queued + running."""

    waiting: int = 0
    queued: int
    running: int
    done: int
    failed: int
    cancelled: int
    active: int

    @classmethod
    def of(cls, counts: dict[Status, int]) -> JobStats:
        """From the store's count per status."""
        return cls(
            waiting=counts.get(Status.WAITING, 0),
            queued=counts.get(Status.QUEUED, 0),
            running=counts.get(Status.RUNNING, 0),
            done=counts.get(Status.DONE, 0),
            failed=counts.get(Status.FAILED, 0),
            cancelled=counts.get(Status.CANCELLED, 0),
            active=sum(counts.get(s, 0) for s in ACTIVE),
        )


class Health(BaseModel):
    """``GET /healthz`` when the store answers."""

    status: str = "ok"


class StatusFilter(enum.StrEnum):
    """``GET /jobs?status=``: one status, or a group (``active``, ``finished``)."""

    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ACTIVE = "active"
    FINISHED = "finished"

    def statuses(self) -> frozenset[Status]:
        """The statuses this filter selects."""
        if self is StatusFilter.ACTIVE:
            return ACTIVE
        if self is StatusFilter.FINISHED:
            return FINISHED
        return frozenset({Status(self.value)})


DEFAULT_PAGE = 50
MAX_PAGE = 200


class ListParams(BaseModel):
    """``GET /jobs`` query parameters. An unknown one is a 422: a typo (``?statuss=``) must not
    silently list everything."""

    model_config = ConfigDict(extra="forbid")

    status: StatusFilter | None = Field(
        default=None, description="A status, or `active` (queued+running) or `finished`."
    )
    type: str | None = Field(
        default=None, max_length=100, pattern=r"^[^\x00]*$", description="A job type."
    )
    parent_id: uuid.UUID | None = Field(
        default=None,
        description=(
            "Only the children of this job (the jobs its handler enqueued): an empty page for "
            "a job of another org. A UUID."
        ),
    )
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="The `next_cursor` of the previous page.",
    )


class InvalidCursor(ValueError):
    """The cursor was not produced by this API (or was altered)."""


def encode_cursor(job: Job) -> str:
    """The opaque keyset cursor after ``job``: base64url of ``created_at|id``."""
    raw = f"{job.created_at.isoformat()}|{job.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The ``(created_at, id)`` a cursor stands for; :class:`InvalidCursor` if malformed."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, _, job_id = raw.partition("|")
        created_at = datetime.fromisoformat(stamp)
        parsed_id = uuid.UUID(job_id)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor("cursor is malformed; use the next_cursor of a previous page") from None
    if created_at.tzinfo is None:
        raise InvalidCursor("cursor is malformed; use the next_cursor of a previous page")
    return created_at, parsed_id
