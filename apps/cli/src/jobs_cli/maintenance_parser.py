"""The parsers of ``jobs schedule``, ``jobs settings``, ``jobs purge`` and ``jobs doctor``
(issue 17); their handlers are in :mod:`jobs_cli.commands.maintenance`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

H = "jobs_cli.commands.maintenance:"


def add_maintenance_commands(sub: Any, add: Callable[..., Any], org: Callable[..., None]) -> None:
    """Add the commands with the CLI's ``_add`` and ``_org`` helpers."""
    schedule = add(sub, "schedule", H + "schedule_help", "manage cron schedules")
    ssub = schedule.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)
    sadd = add(
        ssub,
        "add",
        H + "schedule_add",
        "create a schedule",
        "Create a schedule enqueuing a job of TYPE at each tick of CRON (5 fields, or 6 with "
        "the seconds first) in --tz. Example: jobs schedule add nightly-report --org acme "
        "--type report --cron '0 3 * * *' --tz Europe/Paris",
    )
    sadd.add_argument("name", metavar="NAME", help="unique in the org: a-z 0-9 _ . : -")
    org(sadd, required=True, what="the org whose jobs the schedule enqueues")
    sadd.add_argument("--type", required=True, metavar="TYPE", help="a registered job type")
    sadd.add_argument("--cron", required=True, metavar="EXPR", help="e.g. '0 4 * * *'")
    sadd.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA zone (default UTC)")
    sadd.add_argument("--payload", default="{}", metavar="JSON", help="the jobs' payload")
    sadd.add_argument(
        "--missed",
        choices=["skip", "once", "each"],
        default="once",
        help="ticks missed while no scheduler ran: drop them, fire one job, or one per tick "
        "(default once)",
    )
    sadd.add_argument("--max-catchup", type=int, default=10, metavar="N", help="with each")
    sadd.add_argument("--paused", action="store_true", help="create it paused")
    sadd.add_argument("--description", default="", help="a note")
    sls = add(
        ssub,
        "ls",
        H + "schedule_ls",
        "list schedules with their next run and last job",
    )
    org(sls, required=False, what="only this org's schedules (default: every org)")
    sls.add_argument("--json", action="store_true", help="print JSON")
    for action, summary in (
        ("rm", "delete a schedule"),
        ("pause", "stop a schedule firing"),
        ("resume", "resume a schedule from its next tick"),
        ("run", "enqueue a schedule's job now (its ticks are untouched)"),
    ):
        parser = add(ssub, action, H + f"schedule_{action}", summary)
        parser.add_argument("name", metavar="NAME")
        org(parser, required=True, what="the schedule's org")

    settings = add(
        sub,
        "settings",
        H + "settings_show",
        "show or change the run-time retention settings",
        "Show the run-time retention settings, or change them with 'jobs settings set'. "
        "Anyone with database access is an operator; over HTTP only JOBS_OPERATOR_ORGS may "
        "change them.",
    )
    settings.add_argument("--json", action="store_true", help="print JSON")
    setsub = settings.add_subparsers(dest="settings_command", metavar="ACTION")
    sset = add(
        setsub,
        "set",
        H + "settings_set",
        "change retention settings",
        "Examples: jobs settings set --purge off; jobs settings set --default-max-age-days 30; "
        "jobs settings set --type noop --keep-done 100 --keep-failed 50; "
        "jobs settings set --type noop --clear",
    )
    sset.add_argument("--purge", choices=["on", "off"], help="the daily purge on or off")
    sset.add_argument("--default-max-age-days", type=int, metavar="N", help="0: no default")
    sset.add_argument("--default-keep-done", type=int, metavar="N")
    sset.add_argument("--default-keep-failed", type=int, metavar="N")
    sset.add_argument("--type", metavar="TYPE", help="set the policy of one type (override)")
    sset.add_argument("--max-age-days", type=int, metavar="N")
    sset.add_argument("--keep-done", type=int, metavar="N")
    sset.add_argument("--keep-failed", type=int, metavar="N")
    sset.add_argument("--clear", action="store_true", help="remove --type's override")
    sset.add_argument("--batch-size", type=int, metavar="N", help="rows per delete batch")
    sset.add_argument("--purge-cron", metavar="EXPR", help="when the purge runs (workers restart)")

    purge = add(
        sub,
        "purge",
        H + "purge",
        "apply the retention policies now",
        "Delete the finished jobs the retention policies let go, in batches, printing each "
        "batch; --dry-run prints the policies only. The built-in schedule does the same daily.",
    )
    purge.add_argument("--dry-run", action="store_true", help="show the policies, delete nothing")

    doctor = add(
        sub,
        "doctor",
        H + "doctor",
        "check the health of the jobs table",
        "Queue depth and oldest queued job per type, dead tuples and a bloat estimate, the "
        "last vacuum and analyze, what holds vacuum back, and the orgs near a quota (80 % or "
        "more of their queued jobs or schedules: jobs quotas), each with advice. Exit 1 when "
        "something is bad.",
    )
    doctor.add_argument("--json", action="store_true", help="print JSON")
