"""``jobs quotas``: every org's quotas and use, and the operators' overrides (issue 23,
decision 0033); and the orgs near a quota that ``jobs doctor`` reports.

The CLI talks to the database directly: whoever runs it is an operator. The defaults it shows
are the API's (``JOBS_QUOTA_*`` read from the same environment: run it with the API's).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobs_core.quotas import DEFAULT_QUOTAS, LIMITS, Quotas, quotas_from_environ

from jobs_cli import db, render
from jobs_cli.errors import CliError, UsageError
from jobs_cli.settings import CliSettings

if TYPE_CHECKING:
    from jobs_core.quota_service import OrgQuotas, QuotaService
    from sqlalchemy import Engine


def quota_defaults(environ: Mapping[str, str] | None = None) -> Quotas:
    """The default quotas the environment gives (``JOBS_QUOTA_*``; Quotas()' when unset)."""
    try:
        return quotas_from_environ(os.environ if environ is None else environ)[1]
    except ValueError as error:
        raise UsageError(str(error)) from None


def quota_service(engine: Engine) -> QuotaService:
    """The quota use cases over the database, with the environment's defaults."""
    from jobs_core.quota_service import QuotaService
    from jobs_postgres.quotas import PostgresQuotaStore

    return QuotaService(PostgresQuotaStore(engine), quota_defaults())


HEADERS = ("ORG", "QUEUED", "SCHEDULES", "MIN INTERVAL", "ENQUEUE RATE", "OVERRIDE", "NEAR")


def near_findings(engine: Engine) -> list[tuple[str, str, str]]:
    """``(subject, fact, advice)`` for each org near a quota (``jobs doctor``)."""
    return [
        (
            f"org {n.org_id}",
            f"{n.used:,} of its {n.limit:,} {n.quota.value.replace('_', ' ')} "
            f"({n.fraction:.0%} of its quota)",
            f"expected? raise it: jobs quotas set {n.org_id} --"
            + ("max-queued" if n.quota.value == "queued_jobs" else "max-schedules")
            + " N",
        )
        for report in quota_service(engine).report()
        for n in report.near
    ]


def _row(report: OrgQuotas) -> list[str]:
    q, used = report.quotas, report.usage
    near = ", ".join(f"{n.quota.value} {n.fraction:.0%}" for n in report.near)
    return [
        report.org_id,
        f"{used.queued:,}/{q.max_queued:,}",
        f"{used.schedules:,}/{q.max_schedules:,}",
        f"{q.min_schedule_interval_s:,} s",
        f"{q.enqueue_rate:g}/s (burst {q.enqueue_burst:,})",
        "yes" if report.overridden else "",
        near,
    ]


def show(args: argparse.Namespace, settings: CliSettings) -> int:
    """Every org with queued jobs, schedules or an override (or ``--org``): its quotas, its use
    of them, whether an operator changed them, and the quotas it is near."""
    with db.engine(settings) as engine:
        service = quota_service(engine)
        report = service.report([args.org] if args.org else None)
    if args.json:
        document = {"defaults": service.defaults.to_dict(), "orgs": [r.to_dict() for r in report]}
        print(json.dumps(document, indent=2))
        return 0
    defaults = service.defaults
    print(
        f"defaults: {defaults.max_queued:,} queued jobs, {defaults.max_schedules:,} schedules "
        f"every {defaults.min_schedule_interval_s:,} s or less often, "
        f"{defaults.enqueue_rate:g} jobs/s (bursts of {defaults.enqueue_burst:,})"
    )
    if report:
        print(render.table(HEADERS, [_row(r) for r in report]))
    else:
        print("no org has queued jobs, schedules or an override")
    return 0


def _value(name: str, raw: str) -> int | float | None:
    if raw == "default":
        return None
    try:
        return float(raw) if name == "enqueue_rate" else int(raw)
    except ValueError:
        raise UsageError(
            f"--{name.replace('_', '-')}: {raw!r} is not a number or 'default'"
        ) from None


def set_quotas(args: argparse.Namespace, settings: CliSettings) -> int:
    """Change some of one org's quotas (``default`` gives one back its default)."""
    changes = {
        name: _value(name, raw) for name in LIMITS if (raw := getattr(args, name)) is not None
    }
    if not changes:
        raise UsageError("nothing to change: see jobs quotas set --help")
    with db.engine(settings) as engine:
        service = quota_service(engine)
        try:
            service.set_override(args.org_id, changes, by="cli")
        except ValueError as error:
            raise CliError(f"invalid quota: {error}") from None
        [report] = service.report([args.org_id])
    print(render.table(HEADERS, [_row(report)]))
    return 0


def reset(args: argparse.Namespace, settings: CliSettings) -> int:
    """Give one org the default quotas again."""
    with db.engine(settings) as engine:
        cleared = quota_service(engine).clear_override(args.org_id)
    print(f"org {args.org_id!r}: " + ("back to the defaults" if cleared else "had no override"))
    return 0


def add_quota_commands(sub: Any, add: Any) -> None:
    """``jobs quotas``, ``jobs quotas set``, ``jobs quotas reset``."""
    h = "jobs_cli.commands.quotas:"
    quotas = add(
        sub,
        "quotas",
        h + "show",
        "show every org's quotas and use, or change one org's",
        "Show the quotas per org (defaults: JOBS_QUOTA_* as the API reads them), each org's "
        "queued jobs and schedules against them, and the quotas an org is near (80 % or more). "
        "Change one org's with 'jobs quotas set ORG', give them back with 'jobs quotas reset "
        "ORG'. The API applies a change within JOBS_QUOTA_REFRESH_S.",
    )
    quotas.add_argument("--org", metavar="ORG", help="only this org")
    quotas.add_argument("--json", action="store_true", help="print JSON")
    qsub = quotas.add_subparsers(dest="quotas_command", metavar="ACTION")
    qset = add(
        qsub,
        "set",
        h + "set_quotas",
        "change one org's quotas",
        "Examples: jobs quotas set acme --max-queued 50000; jobs quotas set acme "
        "--min-schedule-interval-s 1 (per-second schedules); jobs quotas set acme "
        "--enqueue-rate default (back to the default).",
    )
    qset.add_argument("org_id", metavar="ORG")
    for name, what in (
        ("max_queued", "queued jobs the org may hold"),
        ("max_schedules", "run-time schedules the org may hold"),
        ("min_schedule_interval_s", "shortest seconds between two ticks of its schedules"),
        ("enqueue_rate", "jobs per second it may enqueue over HTTP"),
        ("enqueue_burst", "jobs it may enqueue at once"),
    ):
        qset.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            metavar="N",
            help=f"{what} (default: {getattr(DEFAULT_QUOTAS, name):g}, or JOBS_QUOTA_"
            f"{name.upper()}; 'default' removes the override)",
        )
    qreset = add(qsub, "reset", h + "reset", "give one org the default quotas again")
    qreset.add_argument("org_id", metavar="ORG")
