"""``jobs types``, ``jobs pause TYPE``, ``jobs resume TYPE``: the job types this deployment
knows, their queued jobs, and pausing one for every org (issue 24, docs/operations.md).

The CLI talks to the database directly: whoever runs it is an operator (over HTTP only a token
of ``JOBS_OPERATOR_ORGS`` may pause). A pause holds for every worker from its commit on; a
resume wakes the idle workers at once.
"""

from __future__ import annotations

import argparse
import getpass
import json
from typing import Any

from jobs_core import SystemClock

from jobs_cli import db, render
from jobs_cli.errors import CliError
from jobs_cli.settings import CliSettings


def add_type_commands(sub: Any, add: Any) -> None:
    """``jobs types``, ``jobs pause``, ``jobs resume``."""
    h = "jobs_cli.commands.types:"
    types = add(
        sub,
        "types",
        h + "types",
        "list the job types, their queued jobs and whether they are paused",
        "List the job types enabled here (the modules of JOBS_MODULES, the demo types with "
        "JOBS_DEMO_TYPES=1): whether an org may enqueue it over HTTP (public), its due queued "
        "jobs in every org, and since when it is paused. A paused type that is no longer "
        "registered is listed too, so it can be resumed.",
    )
    types.add_argument("--json", action="store_true", help="print JSON")
    for name, what, description in (
        (
            "pause",
            "pause a job type for every org",
            "No worker claims the type's jobs from now on, for every org: its queued jobs stay "
            "queued (new ones are still accepted), running ones run to their end. 'jobs show' "
            "of a waiting job says type_paused. Pausing a paused type keeps the first pause.",
        ),
        (
            "resume",
            "resume a paused job type",
            "The type's due jobs are claimable again; idle workers are woken at once.",
        ),
    ):
        parser = add(sub, name, h + name, what, description)
        parser.add_argument("type", metavar="TYPE", help="the job type (see jobs types)")


def types(args: argparse.Namespace, settings: CliSettings) -> int:
    """The table of job types."""
    now = SystemClock().now()
    with db.service(settings) as service:
        pauses = service.paused_types()
        counts = service.store.active_counts(now)
        registry = service.registry
        names = sorted(set(registry.names()) | set(pauses))
    rows: list[dict[str, Any]] = []
    for name in names:
        pause = pauses.get(name)
        rows.append(
            {
                "type": name,
                "registered": name in registry,
                "public": registry.is_public(name),
                "queued": counts.get((name, "queued"), 0),
                "scheduled": counts.get((name, "scheduled"), 0),
                "running": counts.get((name, "running"), 0),
                "paused_at": pause.paused_at.isoformat() if pause else None,
                "paused_by": pause.paused_by if pause else None,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no job type is enabled: see JOBS_MODULES and JOBS_DEMO_TYPES")
        return 0
    table = [
        [
            row["type"] + ("" if row["registered"] else " (not registered)"),
            "yes" if row["public"] else "no",
            f"{row['queued']:,}",
            _paused(row, now),
        ]
        for row in rows
    ]
    print(render.table(["TYPE", "PUBLIC", "QUEUED", "PAUSED"], table))
    return 0


def _paused(row: dict[str, Any], now: Any) -> str:
    pause_at = row["paused_at"]
    if pause_at is None:
        return "-"
    from datetime import datetime

    ago = max(0.0, (now - datetime.fromisoformat(pause_at)).total_seconds())
    return f"since {render.human_duration(ago)} ago by {row['paused_by']}"


def pause(args: argparse.Namespace, settings: CliSettings) -> int:
    """Pause a registered type."""
    with db.service(settings) as service:
        if args.type not in service.registry:
            known = ", ".join(sorted(service.registry.names())) or "none"
            raise CliError(f"unknown job type {args.type!r} (enabled here: {known})")
        paused = service.pause_type(args.type, f"cli:{_user()}")
    print(
        f"paused {paused.type} for every org since {paused.paused_at.isoformat(timespec='seconds')}"
        f" (by {paused.paused_by}); resume with: jobs resume {paused.type}"
    )
    return 0


def resume(args: argparse.Namespace, settings: CliSettings) -> int:
    """Resume a paused type."""
    with db.service(settings) as service:
        resumed = service.resume_type(args.type)
        known = args.type in service.registry
    if not resumed and not known:
        raise CliError(f"unknown job type {args.type!r}, and no type of that name is paused")
    print(f"resumed {args.type}" if resumed else f"{args.type} was not paused")
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a container without /etc/passwd entry
        return "unknown"
