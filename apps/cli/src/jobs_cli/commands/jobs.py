"""``jobs enqueue | ls | show | cancel | retry``: the job use cases from a terminal."""

from __future__ import annotations

import argparse
import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobs_core.clock import SystemClock
from jobs_core.domain import ACTIVE, FINISHED, Job, Status
from jobs_core.errors import JobNotFound, UnknownJobType
from jobs_core.ports import JobFilter
from jobs_core.waits import DependencyInvalid

from jobs_cli import db, render
from jobs_cli.errors import CliError, UsageError
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from jobs_core.service import JobService

STATUS_CHOICES = [s.value for s in Status] + ["active", "finished"]


AWAITED_SHOWN = 20
"""The awaited jobs ``jobs show`` lists (a batch may have 10,000; ``--json`` lists them all)."""


def parse_payload(text: str) -> dict[str, Any]:
    """The ``--payload`` JSON object, or :class:`UsageError` saying what is wrong with it."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--payload is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f"--payload must be a JSON object, got {type(value).__name__}: {text}")
    return value


def parse_instant(text: str, option: str = "--run-at") -> datetime:
    """An ISO 8601 instant; one without an offset is local time."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{option} {text!r} is not an ISO 8601 date-time (e.g. 2026-01-31T18:30:00+01:00)"
        ) from None
    return value if value.tzinfo is not None else value.astimezone()


def parse_job_id(text: str) -> uuid.UUID:
    """A job id (a UUID)."""
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise UsageError(
            f"{text!r} is not a job id (a UUID such as those 'jobs ls' prints)"
        ) from None


def parse_statuses(text: str | None) -> frozenset[Status] | None:
    """``--status``: one status, or ``active`` / ``finished``."""
    if text is None:
        return None
    key = text.strip().lower()
    if key == "active":
        return ACTIVE
    if key == "finished":
        return FINISHED
    try:
        return frozenset({Status(key)})
    except ValueError:
        raise UsageError(f"--status {text!r} is not one of {', '.join(STATUS_CHOICES)}") from None


def _print_job(job: Job, as_json: bool) -> None:
    if as_json:
        print(json.dumps(render.job_json(job), indent=2, ensure_ascii=False))
    else:
        print(render.job_details(job, SystemClock().now()))


def enqueue(args: argparse.Namespace, settings: CliSettings) -> int:
    """Enqueue a job; the id is the last line of stdout."""
    payload = parse_payload(args.payload)
    run_at = parse_instant(args.run_at) if args.run_at else None
    org = args.org.strip()
    if not org:
        raise UsageError("--org must not be empty")
    if args.dedup_key is not None and not args.dedup_key:
        raise UsageError("--dedup-key must not be empty (leave it out for no key)")

    from jobs_core.service import Enqueued

    with db.service(settings) as svc:
        if not args.new_org and not _org_is_known(svc, org):
            raise CliError(
                f"org {org!r} has no job and no API token yet: is it a typo? "
                "Pass --new-org to create its first job"
            )
        try:
            if args.after:
                if run_at is not None:
                    raise UsageError("--after and --run-at do not go together")
                after = [parse_job_id(text) for text in args.after]
                waiter = svc.enqueue_after(
                    org, args.type, payload, after, dedup_key=args.dedup_key, priority=args.priority
                )
                result = Enqueued(waiter, created=True)
            else:
                result = svc.enqueue(
                    org,
                    args.type,
                    payload,
                    dedup_key=args.dedup_key,
                    run_at=run_at,
                    priority=args.priority,
                )
        except DependencyInvalid as error:
            missing = ", ".join(str(job_id) for job_id in error.missing)
            raise CliError(f"{error}{': ' + missing if missing else ''}") from None
        except UnknownJobType:
            known = ", ".join(svc.registry.names()) or "none"
            hint = ""
            if not settings.demo_types and args.type in {"noop", "sleep", "fail", "crash"}:
                hint = " (the demo types need JOBS_DEMO_TYPES=1)"
            raise CliError(f"unknown job type {args.type!r}; known types: {known}{hint}") from None
    job = result.job
    if args.json:
        print(json.dumps({**render.job_json(job), "created": result.created}, indent=2))
        return 0
    if result.created:
        print(f"enqueued {job.type} job for org {job.org_id}: {job.status}")
    else:
        key = job.requested_dedup_key
        print(f"dedup key {key!r} is held by a {job.status} job; returned that one")
    print(job.id)
    return 0


def _org_is_known(svc: JobService, org: str) -> bool:
    """Whether the database has seen ``org``: a job of it (any status) or an API token of it
    (revoked ones count). ``jobs enqueue`` asks for ``--new-org`` before an org's first job, so
    that a typo of an org name (``demoo``) is not a new org."""
    from jobs_postgres.tokens import PostgresTokenStore

    if svc.list_jobs(org, JobFilter(limit=1)):
        return True
    engine = getattr(svc.store, "engine", None)
    return engine is not None and bool(PostgresTokenStore(engine).list(org))


def ls(args: argparse.Namespace, settings: CliSettings) -> int:
    """List jobs, newest first."""
    query = JobFilter(
        statuses=parse_statuses(args.status),
        type=args.type,
        parent_id=None if args.parent is None else parse_job_id(args.parent),
        limit=args.limit,
    )
    with db.reads(settings) as reads:
        if args.org is not None:
            jobs = reads.list_jobs(args.org, query)
        else:
            jobs = reads.list_all_orgs(query)
    if args.json:
        print(json.dumps([render.job_json(j) for j in jobs], indent=2, ensure_ascii=False))
        return 0
    if not jobs:
        of = f" of job {query.parent_id}" if query.parent_id is not None else ""
        print("no jobs" + (f" for org {args.org}" if args.org else "") + of)
        return 0
    print(render.jobs_table(jobs, SystemClock().now(), with_org=args.org is None))
    return 0


def show(args: argparse.Namespace, settings: CliSettings) -> int:
    """Show one job: its attempts, what it awaits, its children counted, why it waits."""
    from jobs_core.wait_service import AwaitedSummary
    from jobs_core.waiting import why_waiting

    job_id = parse_job_id(args.job_id)
    with db.reads(settings) as reads:
        found = reads.get(args.org, job_id) if args.org is not None else reads.get_any_org(job_id)
        if found is None:
            if args.org is not None:
                raise JobNotFound()
            raise CliError(f"no job with id {job_id}")
        job = found
        history = reads.attempts(job.org_id, job.id)
        dependencies = reads.awaited(job.org_id, job.id)  # its dependencies, a callback's batch
        if dependencies is None:  # deleted since
            raise JobNotFound()
        awaited = AwaitedSummary(dependencies)
        children = reads.children_counts(job.org_id, [job.id]).get(job.id)
    # Why a queued job waits depends on its type's declarations: only then are the modules
    # loaded and the registry built, over the store (why_waiting needs no type for another job).
    if job.status is Status.QUEUED:
        with db.service(settings) as svc:
            waiting = svc.why_waiting(job)
    else:
        waiting = why_waiting(job, None, None, SystemClock().now())
    if args.json:
        document = render.job_json(job)
        if job.status in (Status.QUEUED, Status.WAITING):
            document["waiting"] = [{"code": r.code, "message": r.message} for r in waiting]
        document["attempt_history"] = render.attempts_json(history)
        document["children"] = (
            None if children is None else {"total": children.total, "ended": children.ended}
        )
        document["awaited"] = [
            {"id": str(a.id), "type": a.type, "status": a.status.value} for a in awaited.jobs
        ]
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print(render.job_details(job, SystemClock().now(), waiting, history, children))
        if awaited.jobs:
            counts = ", ".join(f"{n} {s.value}" for s, n in awaited.counts.items() if n)
            print(f"awaits       {awaited.ended} of {len(awaited.jobs)} ended ({counts})")
            for each in awaited.jobs[:AWAITED_SHOWN]:  # a batch's members, a parent's children
                print(f"  {each.id}  {each.status.value:<9}  {each.type}")
            if len(awaited.jobs) > AWAITED_SHOWN:
                print(f"  ... and {len(awaited.jobs) - AWAITED_SHOWN} more (--json lists them all)")
    return 0


def cancel(args: argparse.Namespace, settings: CliSettings) -> int:
    """Cancel a queued job, or ask a running one to stop."""
    job_id = parse_job_id(args.job_id)
    with db.service(settings) as svc:
        job = svc.cancel(args.org, job_id)
    if args.json:
        _print_job(job, True)
    elif job.status is Status.CANCELLED:
        print(f"cancelled job {job.id}")
    else:
        print(f"asked running job {job.id} to stop; its handler sees the request")
    return 0


def retry(args: argparse.Namespace, settings: CliSettings) -> int:
    """Queue a failed or cancelled job again."""
    job_id = parse_job_id(args.job_id)
    with db.service(settings) as svc:
        job = svc.retry(args.org, job_id)
    if args.json:
        _print_job(job, True)
    else:
        print(f"queued job {job.id} again ({job.type}, attempts reset)")
    return 0
