"""Bulk actions (issue 24, item 4): retry, cancel or delete many of an org's jobs at once, chosen by
id or by the list's filter, each job through the single-job use case of
:class:`jobs_core.JobService` (:meth:`~jobs_core.JobService.retry`, ``cancel``, ``delete``), so
every rule of one job holds for each: its states, its events, its end hooks, the org's isolation
(a job of another org is skipped as not found, exactly as an absent id: no existence leaks).

A bulk action is not one transaction: each job is its own write, and the report says what became
of each (counts per outcome, and every skipped id with why). A dry run changes nothing and
reports what the same call would do now (the panel's confirmation says how many); a job may
change between the dry run and the run, and the run's report is the truth.

Limits (:data:`MAX_IDS`, :data:`DEFAULT_LIMIT`, :data:`MAX_LIMIT`) keep one call bounded: a
selection larger than the limit is done in several calls (the report's ``matched`` and
``more`` say whether more jobs match the filter).
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jobs_core import domain
from jobs_core.domain import Job, Status
from jobs_core.errors import DedupConflict, InvalidTransition, JobNotFound
from jobs_core.ports import JobFilter
from jobs_core.quotas import QuotaExceeded
from jobs_core.service import JobService

MAX_IDS = 1000
"""The most ids one call may name."""
DEFAULT_LIMIT = 100
"""How many jobs of a filter one call acts on when it does not say."""
MAX_LIMIT = 1000
"""The largest ``limit`` of a call on a filter."""


class BulkAction(enum.StrEnum):
    """What to do to each job: the single-job actions of the API."""

    RETRY = "retry"
    CANCEL = "cancel"
    DELETE = "delete"


class Skip(enum.StrEnum):
    """Why a job was left as it was."""

    NOT_FOUND = "not_found"
    """No job of the org has this id (absent, or another org's: the same answer)."""
    WRONG_STATUS = "wrong_status"
    """The action does not apply to the job's status (retry a done job, cancel a finished one,
    delete a live one)."""
    PROTECTED = "protected"
    """The job's type is domain history: never deleted."""
    DEDUP_CONFLICT = "dedup_conflict"
    """Retry: another job holds its dedup key now."""
    QUOTA_EXCEEDED = "quota_exceeded"
    """Retry: the org is over a quota (each retry is admitted as an enqueue); the jobs after it
    are not retried either."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A job left as it was, with why (``detail``: the rule's own words)."""

    id: uuid.UUID
    reason: Skip
    detail: str


@dataclass(frozen=True, slots=True)
class Selection:
    """The jobs a call acts on: ``ids`` (1 to :data:`MAX_IDS`, in that order), or the org's jobs
    matching ``statuses`` and ``type`` (the list's filter), newest first, at most ``limit``."""

    ids: tuple[uuid.UUID, ...] | None = None
    statuses: frozenset[Status] | None = None
    type: str | None = None
    limit: int = DEFAULT_LIMIT

    def __post_init__(self) -> None:
        if self.ids is not None:
            if not 1 <= len(self.ids) <= MAX_IDS:
                raise ValueError(f"name 1 to {MAX_IDS} ids, not {len(self.ids)}")
            if self.statuses is not None or self.type is not None:
                raise ValueError("name ids or a filter (status, type), not both")
        elif not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"limit is 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})")


@dataclass(slots=True)
class BulkReport:
    """What a bulk call did (or, dry, would do): ``done`` counts the outcomes
    (:func:`outcome_name`: ``retried``, ``cancelled``, ``cancel_requested``, ``deleted``);
    ``skipped`` lists each job left as it was; ``matched`` is how many jobs the selection
    named; ``more`` says a filter matched more jobs than ``limit``."""

    action: BulkAction
    dry_run: bool
    matched: int = 0
    more: bool = False
    done: Counter[str] = field(default_factory=Counter)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def acted(self) -> int:
        """How many jobs were (or would be) changed."""
        return sum(self.done.values())


def outcome_name(action: BulkAction, job: Job) -> str:
    """What ``action`` made of ``job`` (the job as the action left it)."""
    if action is BulkAction.CANCEL:
        return "cancelled" if job.status is Status.CANCELLED else "cancel_requested"
    return "retried" if action is BulkAction.RETRY else "deleted"


def _would(service: JobService, action: BulkAction, job: Job) -> str:
    """What ``action`` would make of ``job`` now, by the same rules as the action itself (raises
    as the action would)."""
    now = service.clock.now()
    if action is BulkAction.RETRY:
        return outcome_name(action, domain.retry(job, now))
    if action is BulkAction.CANCEL:
        return outcome_name(action, domain.cancel(job, now))
    service.check_deletable(job)
    return "deleted"


def _act(service: JobService, action: BulkAction, org_id: str, job_id: uuid.UUID) -> str:
    """The single-job use case; what it made of the job."""
    if action is BulkAction.RETRY:
        return outcome_name(action, service.retry(org_id, job_id))
    if action is BulkAction.CANCEL:
        return outcome_name(action, service.cancel(org_id, job_id))
    service.delete(org_id, job_id)
    return "deleted"


def _jobs(
    service: JobService, org_id: str, selection: Selection
) -> tuple[list[Job], list[uuid.UUID], bool]:
    """The org's jobs the selection names, the ids that name none (absent or foreign), and
    whether a filter matched more than its limit."""
    if selection.ids is not None:
        found: list[Job] = []
        missing: list[uuid.UUID] = []
        for job_id in dict.fromkeys(selection.ids):  # each id once, in order
            job = service.store.get(org_id, job_id)
            if job is None:
                missing.append(job_id)
            else:
                found.append(job)
        return found, missing, False
    query = JobFilter(statuses=selection.statuses, type=selection.type, limit=selection.limit + 1)
    listed = service.list_jobs(org_id, query)
    return listed[: selection.limit], [], len(listed) > selection.limit


def run_bulk(
    service: JobService,
    org_id: str,
    action: BulkAction,
    selection: Selection,
    *,
    dry_run: bool = False,
    admit: Callable[[], None] | None = None,
) -> BulkReport:
    """Apply ``action`` to each job of ``selection`` (or, with ``dry_run``, say what it would do).

    ``admit`` is called before each retry (the API admits each as an enqueue under the org's
    quotas); its :class:`~jobs_core.quotas.QuotaExceeded` skips that job and every one after it
    as :attr:`Skip.QUOTA_EXCEEDED`."""
    jobs, missing, more = _jobs(service, org_id, selection)
    report = BulkReport(action, dry_run, matched=len(jobs), more=more)
    for job_id in missing:
        report.skipped.append(Skipped(job_id, Skip.NOT_FOUND, "no such job"))
    over_quota: str | None = None
    for job in jobs:
        if over_quota is not None:
            report.skipped.append(Skipped(job.id, Skip.QUOTA_EXCEEDED, over_quota))
            continue
        try:
            # The action's own rules on the job as read: a job it does not apply to is skipped
            # before a retry is admitted under the quotas (the store checks again as it writes).
            would = _would(service, action, job)
            if dry_run:
                report.done[would] += 1
                continue
            if action is BulkAction.RETRY and admit is not None:
                admit()
            report.done[_act(service, action, org_id, job.id)] += 1
        except JobNotFound:  # gone since it was read
            report.skipped.append(Skipped(job.id, Skip.NOT_FOUND, "no such job"))
        except InvalidTransition as error:
            protected = action is BulkAction.DELETE and service.is_protected(job)
            skip = Skip.PROTECTED if protected else Skip.WRONG_STATUS
            report.skipped.append(Skipped(job.id, skip, str(error)))
        except DedupConflict as error:
            report.skipped.append(Skipped(job.id, Skip.DEDUP_CONFLICT, str(error)))
        except QuotaExceeded as error:
            over_quota = str(error)
            report.skipped.append(Skipped(job.id, Skip.QUOTA_EXCEEDED, over_quota))
    return report


def ids_of(raw: Sequence[str]) -> tuple[uuid.UUID, ...]:
    """Ids as sent by a client; ValueError naming the first that is not a UUID."""
    parsed = []
    for text in raw:
        try:
            parsed.append(uuid.UUID(text))
        except ValueError:
            raise ValueError(f"{text[:40]!r} is not a job id (a UUID)") from None
    return tuple(parsed)
