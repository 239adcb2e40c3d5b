"""The bodies of the Overview's routes (:mod:`jobs_api.overview`): the view of ``GET /overview``,
the candidates of an ambiguous lookup, and a bulk action's request and report."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from jobs_core.bulk import DEFAULT_LIMIT, MAX_IDS, MAX_LIMIT, BulkAction, BulkReport
from jobs_core.domain import Job, Status
from jobs_core.overview import Bucket, Series, TypeCounts, Window
from jobs_core.workers import WorkerInfo
from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobs_api.schemas import StatusFilter


class BucketOut(BaseModel):
    """One bucket of a type's series: the jobs that finished in it, by status, and the p50/p95
    of their waits (last attempt's start minus the later of enqueue and ``run_at``) and of the
    run time of the attempts that ended in it, in seconds (null: none in the bucket)."""

    start: datetime
    done: int
    failed: int
    cancelled: int
    wait_p50: float | None
    wait_p95: float | None
    run_p50: float | None
    run_p95: float | None

    @classmethod
    def of(cls, bucket: Bucket) -> BucketOut:
        """From the domain's bucket."""
        return cls(
            start=bucket.start,
            done=bucket.done,
            failed=bucket.failed,
            cancelled=bucket.cancelled,
            wait_p50=bucket.wait_p50,
            wait_p95=bucket.wait_p95,
            run_p50=bucket.run_p50,
            run_p95=bucket.run_p95,
        )


class TypeOverview(BaseModel):
    """One job type: its jobs by status (following the filters) and its series (empty when
    nothing of the type finished in the window)."""

    type: str
    counts: dict[Status, int]
    total: int
    series: list[BucketOut]


class WorkerOut(BaseModel):
    """A live worker process (operators only): its slots and the types it runs."""

    host: str
    pid: int
    slots: int
    types: list[str]
    started_at: datetime
    last_seen_at: datetime

    @classmethod
    def of(cls, worker: WorkerInfo) -> WorkerOut:
        """From the registry's record."""
        return cls(
            host=worker.host,
            pid=worker.pid,
            slots=worker.concurrency,
            types=list(worker.types),
            started_at=worker.started_at,
            last_seen_at=worker.last_seen_at,
        )


class OverviewParams(BaseModel):
    """``GET /overview`` query parameters (an unknown one is a 422, as for ``GET /jobs``)."""

    model_config = ConfigDict(extra="forbid")

    window: Window = Field(
        default=Window.HOUR, description="`hour` (1-minute buckets) or `day` (30 minutes)."
    )
    status: StatusFilter | None = Field(
        default=None, description="Count only these: a status, `active` or `finished`."
    )
    type: str | None = Field(
        default=None, max_length=100, pattern=r"^[^\x00]*$", description="One job type."
    )


class OverviewOut(BaseModel):
    """``GET /overview``: the org's jobs per type, over a window."""

    window: Window
    start: datetime = Field(description="The first bucket's start.")
    bucket_s: float = Field(description="The size of one bucket, in seconds.")
    types: list[TypeOverview]
    workers: list[WorkerOut] | None = Field(
        description="The live workers; null unless the token is an operator's "
        "(JOBS_OPERATOR_ORGS): workers serve every org."
    )
    usage: dict[str, Any] = Field(description="The org's quotas and its use of them (/quotas).")


def overview_of(
    window: Window,
    counts: list[TypeCounts],
    series: Series,
    *,
    workers: list[WorkerInfo] | None,
    usage: dict[str, Any],
    type_name: str | None,
) -> OverviewOut:
    """The view from the reads: every type counted or with a series (only ``type_name``'s when
    the filter names one), sorted by name."""
    by_type = {s.type: s.buckets for s in series.types if type_name in (None, s.type)}
    counted = {c.type: c for c in counts}
    types = [
        TypeOverview(
            type=name,
            counts=counted[name].counts if name in counted else dict.fromkeys(Status, 0),
            total=counted[name].total if name in counted else 0,
            series=[BucketOut.of(b) for b in by_type.get(name, [])],
        )
        for name in sorted(set(by_type) | set(counted))
    ]
    return OverviewOut(
        window=window,
        start=series.start,
        bucket_s=series.bucket_s,
        types=types,
        workers=None if workers is None else [WorkerOut.of(w) for w in workers],
        usage=usage,
    )


class Candidate(BaseModel):
    """A job an ambiguous lookup matched."""

    id: uuid.UUID
    type: str
    status: Status
    created_at: datetime

    @classmethod
    def of(cls, job: Job) -> Candidate:
        """From a domain job."""
        return cls(id=job.id, type=job.type, status=job.status, created_at=job.created_at)


class BulkIn(BaseModel):
    """``POST /jobs/bulk``: an action on ``ids``, or on the org's jobs matching ``status`` and
    ``type`` (newest first, at most ``limit``); ``dry_run`` counts without changing anything."""

    model_config = ConfigDict(extra="forbid")

    action: BulkAction
    ids: list[uuid.UUID] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_IDS,
        description=f"The jobs (1 to {MAX_IDS} ids); or give a filter instead.",
    )
    status: StatusFilter | None = Field(default=None, description="The list's status filter.")
    type: str | None = Field(default=None, max_length=100, description="The list's type filter.")
    limit: int = Field(
        default=DEFAULT_LIMIT,
        ge=1,
        le=MAX_LIMIT,
        description=f"With a filter: act on at most this many jobs (default {DEFAULT_LIMIT}).",
    )
    dry_run: bool = Field(default=False, description="Count what would be done; change nothing.")

    @model_validator(mode="after")
    def _ids_or_filter(self) -> BulkIn:
        if self.ids is not None and (self.status is not None or self.type is not None):
            raise ValueError("give ids or a filter (status, type), not both")
        return self


class SkippedOut(BaseModel):
    """A job left as it was, with why (``not_found`` for an absent or another org's id)."""

    id: uuid.UUID
    reason: str
    detail: str


class BulkOut(BaseModel):
    """What a bulk action did (or would do, ``dry_run``)."""

    action: BulkAction
    dry_run: bool
    matched: int = Field(description="The org's jobs the ids or the filter named (up to limit).")
    more: bool = Field(description="The filter matched more jobs than `limit`.")
    acted: int = Field(description="The jobs changed (or that would be).")
    done: dict[str, int] = Field(
        description="Per outcome: retried, cancelled, cancel_requested, deleted."
    )
    skipped: list[SkippedOut]

    @classmethod
    def of(cls, report: BulkReport) -> BulkOut:
        """From the core's report."""
        return cls(
            action=report.action,
            dry_run=report.dry_run,
            matched=report.matched,
            more=report.more,
            acted=report.acted,
            done=dict(report.done),
            skipped=[SkippedOut(id=s.id, reason=s.reason, detail=s.detail) for s in report.skipped],
        )
