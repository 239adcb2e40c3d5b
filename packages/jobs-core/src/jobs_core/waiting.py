""" "Why is this job waiting?": the reasons a queued job has not started, from stored facts.

Pure: the store counts (:class:`~jobs_core.ports.WaitingFacts`), this module says what they
mean for one job, in the order a reader needs them (docs/flow-control.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from jobs_core import rates
from jobs_core.domain import Job, Status
from jobs_core.flow import KeyScope
from jobs_core.ports import AHEAD_CAP, WaitingFacts

if TYPE_CHECKING:  # the reasons of a job that is not queued need no type (the CLI's reads)
    from jobs_core.registry import JobType


@dataclass(frozen=True, slots=True)
class WaitReason:
    """One reason: a stable ``code`` for programs and a sentence for people."""

    code: str
    message: str


AWAITING = WaitReason(
    "awaiting", "waits for other jobs to end (its dependencies or its batch's members)"
)


def why_waiting(
    job: Job, job_type: JobType | None, facts: WaitingFacts | None, now: datetime
) -> list[WaitReason]:
    """Why the queued (or waiting) ``job`` has not started yet; empty for any other.

    Codes: ``awaiting`` (it waits for other jobs to end: its dependencies, its batch;
    ``GET /jobs/{id}/awaited`` lists them), ``scheduled`` (``run_at`` is later), ``snoozed``
    (its handler asked to run later),
    ``type_paused`` (an operator paused its type: no claim takes it until it is resumed),
    ``key_busy`` (its concurrency key at N of N running), ``rate_limited`` (its key has started
    N jobs in the last window of its type's rate limit: "rate limited: next start at T"),
    ``type_busy`` (its type at its cap),
    ``ahead`` (N due jobs of its type are taken before it), ``no_worker`` (no live worker serves
    its type), ``unknown_type`` (this deployment does not know the type), ``next`` (nothing holds
    it back: the next free worker slot takes it).
    """
    if job.status is Status.WAITING:
        return [AWAITING]
    if job.status is not Status.QUEUED:
        return []
    reasons: list[WaitReason] = []
    if job.run_at > now:
        at = job.run_at.isoformat(timespec="seconds")
        if job.snoozes and job.error is None:
            reasons.append(
                WaitReason("snoozed", f"snoozed until {at} (snoozed {job.snoozes} times so far)")
            )
        else:
            reasons.append(WaitReason("scheduled", f"scheduled for later: runs at {at}"))
    if job_type is None:
        reasons.append(WaitReason("unknown_type", f"job type {job.type!r} is not registered here"))
        return reasons
    if facts is None:
        return reasons or [WaitReason("next", "due: the next free worker slot takes it")]
    if facts.type_paused:
        reasons.append(
            WaitReason(
                "type_paused",
                f"type {job.type!r} is paused: no worker takes its jobs until an operator "
                f"resumes it (`jobs resume {job.type}`)",
            )
        )
    field = job_type.concurrency_key
    if (
        field is not None
        and job_type.concurrency_limit is not None
        and job.concurrency_key is not None
        and facts.running_key >= job_type.concurrency_limit
    ):
        shared = " (every org's jobs)" if job_type.concurrency_scope is KeyScope.GLOBAL else ""
        reasons.append(
            WaitReason(
                "key_busy",
                f"its key {field}={job.payload.get(field)}{shared} is at "
                f"{facts.running_key} of {job_type.concurrency_limit} running",
            )
        )
    rate = job_type.rate
    if rate is not None and job.concurrency_key is not None:
        next_at = rates.next_start(facts.rate_starts, rate, now)
        if next_at is not None:
            reasons.append(
                WaitReason(
                    "rate_limited",
                    f"rate limited: next start at {next_at.isoformat(timespec='milliseconds')} "
                    f"({_key_name(job, job_type)} has started {rate.count} jobs in the last "
                    f"{rate.per_s:g} s, its limit)",
                )
            )
    if job_type.max_running is not None and facts.running_type >= job_type.max_running:
        reasons.append(
            WaitReason(
                "type_busy",
                f"type {job.type!r} is at its cap: {facts.running_type} of "
                f"{job_type.max_running} running",
            )
        )
    if facts.ahead:
        many = f"{AHEAD_CAP}+" if facts.ahead >= AHEAD_CAP else str(facts.ahead)
        reasons.append(WaitReason("ahead", f"{many} due jobs of type {job.type!r} are ahead of it"))
    if facts.live_workers == 0:
        reasons.append(
            WaitReason("no_worker", f"no live worker serves type {job.type!r}; start one")
        )
    return reasons or [WaitReason("next", "due: the next free worker slot takes it")]


def _key_name(job: Job, job_type: JobType) -> str:
    """The key of a job's flow limits as a reader knows it: its payload's value, its org, or
    its whole type."""
    shared = job_type.concurrency_scope is KeyScope.GLOBAL
    field = job_type.concurrency_key
    if field is not None:
        return f"its key {field}={job.payload.get(field)}" + (
            " (every org's jobs)" if shared else ""
        )
    return f"type {job.type!r}" + (" (every org's jobs)" if shared else f" in org {job.org_id!r}")
