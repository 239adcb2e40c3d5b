"""Jobs that wait for other jobs (issue 25, decision 0041, docs/flows.md).

A job enqueued with ``depends_on`` — or a batch's callback, which depends on the batch's members
— starts ``waiting``: no claim ever takes it. Each end of a job it awaits is recorded in the
write that ends it (the store's own mechanism: a trigger on PostgreSQL, the table's write in
memory), and a release pass (:meth:`jobs_core.JobService.release_waiting`, run by every worker)
takes those ends and applies :func:`release` to each waiter: it stays waiting, is queued (every
awaited job ended), or is cancelled (one did not end ``done`` and its rule wants them all done).

The rules are the functions of this module; the stores only count and apply them. A waiter's
``waiting_on`` (how many of the jobs it awaits have not ended) and its :class:`WaitRule` are
private columns of its row, never part of a :class:`~jobs_core.domain.Job`: counting down sends
no event; only the status change does.

Cycles cannot exist: a job may depend only on jobs that exist when it is enqueued, and its own id
is made at its insert.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

from jobs_core.domain import Job
from jobs_core.errors import JobsError
from jobs_core.states import Status

MAX_DEPENDENCIES = 1000
"""The most jobs one enqueue may depend on."""

MAX_BATCH = 10_000
"""The most members of one batch (one insert of their rows, one callback)."""

DEPENDENCY_FAILED = "a job it depends on ended {status}: {id}"
"""The error of a job cancelled because a job it depends on did not end done."""


class WaitRule(enum.StrEnum):
    """When a waiting job may run.

    ``ALL_DONE`` (a dependency's default, ``after_failed_dependency="cancel"``): once every job it
    awaits ended ``done``; the first that ends otherwise cancels it. ``ALL_ENDED`` (a batch's
    callback; a type declaring ``after_failed_dependency="run"``): once every one has ended,
    whatever its end.
    """

    ALL_DONE = "all_done"
    ALL_ENDED = "all_ended"


class DependencyInvalid(JobsError):
    """A ``depends_on`` or a batch that cannot be accepted (too many ids, a duplicate, an id
    that is not a job of the org: ``missing``)."""

    def __init__(self, message: str, missing: Sequence[uuid.UUID] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


@dataclass(frozen=True, slots=True)
class Awaited:
    """A job another waits for, as its waiter's reader sees it (``ctx.awaited``, the API)."""

    id: uuid.UUID
    type: str
    status: Status


class Ended(NamedTuple):
    """The end of an awaited job: which job, and the status it ended in."""

    id: uuid.UUID
    status: Status


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a release pass holds of a waiter: the job, its count of unended awaited jobs, its
    rule, and the ends recorded for it since the last pass (one per ended job)."""

    job: Job
    waiting_on: int
    rule: WaitRule
    ended: tuple[Ended, ...]


@dataclass(frozen=True, slots=True)
class Released:
    """The waiter after :func:`release`: the job as it is now and its new count."""

    job: Job
    waiting_on: int


class Release(Protocol):
    """:func:`release`, as a store's release pass is given it."""

    def __call__(self, waiting: Waiting, now: datetime) -> Released: ...


def check_dependencies(ids: Sequence[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """The ids a job may depend on, checked: 1 to :data:`MAX_DEPENDENCIES`, no duplicate."""
    if not ids:
        raise DependencyInvalid("depends_on must name at least one job (or be left out)")
    if len(ids) > MAX_DEPENDENCIES:
        raise DependencyInvalid(
            f"depends_on names {len(ids)} jobs; at most {MAX_DEPENDENCIES} (use a batch for more)"
        )
    if len(set(ids)) != len(ids):
        raise DependencyInvalid("depends_on names a job twice")
    return tuple(ids)


def check_batch(size: int) -> None:
    """A batch has 1 to :data:`MAX_BATCH` members."""
    if size < 1:
        raise DependencyInvalid("a batch needs at least one member")
    if size > MAX_BATCH:
        raise DependencyInvalid(f"a batch has at most {MAX_BATCH} members, not {size}")


def start(job: Job, rule: WaitRule, awaited: Sequence[Ended], now: datetime) -> Released:
    """The job a waiter's insert writes, given the jobs it awaits as they are at that instant
    (read under their row locks): ``waiting`` on those not ended, or :func:`release`'s answer
    at once for those that have."""
    waiting = dataclasses.replace(job, status=Status.WAITING)
    ended = tuple(end for end in awaited if end.status.is_finished)
    return release(Waiting(waiting, len(awaited), rule, ended), now)


def release(waiting: Waiting, now: datetime) -> Released:
    """A waiter told that the jobs of ``waiting.ended`` have ended.

    Cancelled at once when its rule is ``ALL_DONE`` and one of them did not end ``done``;
    queued when none is left to wait for (its ``run_at`` kept: a later one still schedules it);
    else still waiting, with fewer to wait for. A waiter that is no longer waiting (cancelled by
    a person meanwhile) is left as it is.
    """
    job = waiting.job
    left = max(0, waiting.waiting_on - len(waiting.ended))
    if job.status is not Status.WAITING:
        return Released(job, left)
    if waiting.rule is WaitRule.ALL_DONE:
        bad = next((end for end in waiting.ended if end.status is not Status.DONE), None)
        if bad is not None:
            error = DEPENDENCY_FAILED.format(status=bad.status.value, id=bad.id)
            return Released(_cancelled(job, error, now), left)
    if left == 0:
        return Released(dataclasses.replace(job, status=Status.QUEUED), 0)
    return Released(job, left)


def _cancelled(job: Job, error: str, now: datetime) -> Job:
    return dataclasses.replace(
        job, status=Status.CANCELLED, error=error, finished_at=now, dedup_key=None
    )


def rule_for(after_failed_dependency: str) -> WaitRule:
    """The rule of a dependent of a type declaring ``after_failed_dependency``."""
    return WaitRule.ALL_ENDED if after_failed_dependency == "run" else WaitRule.ALL_DONE
