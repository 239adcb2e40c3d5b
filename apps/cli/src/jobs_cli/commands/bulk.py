"""``jobs bulk retry|cancel|delete --org ORG (ID... | --status S [--type T] [--limit N])
[--dry-run]``: an action on many of an org's jobs, each through its single-job use case
(``jobs_core.bulk``), with a table of what became of them."""

from __future__ import annotations

import argparse
import json
from collections import Counter

from jobs_core.bulk import BulkAction, BulkReport, Selection, run_bulk

from jobs_cli import db, render
from jobs_cli.commands.jobs import parse_job_id, parse_statuses
from jobs_cli.errors import UsageError
from jobs_cli.settings import CliSettings


def _selection(args: argparse.Namespace) -> Selection:
    statuses = parse_statuses(args.status)
    if args.ids and (statuses is not None or args.type is not None):
        raise UsageError("name job ids or a filter (--status, --type), not both")
    if not args.ids and statuses is None and args.type is None:
        raise UsageError(
            "name the jobs: ids, or a filter (--status failed, --type T); "
            "a bulk action never applies to every job of an org by default"
        )
    try:
        if args.ids:
            return Selection(ids=tuple(parse_job_id(text) for text in args.ids))
        return Selection(statuses=statuses, type=args.type, limit=args.limit)
    except ValueError as error:
        raise UsageError(str(error)) from None


def report_table(report: BulkReport) -> str:
    """The report as a readable table: per outcome, then per reason skipped."""
    verb = "would be" if report.dry_run else "were"
    rows = [[outcome, f"{count:,}"] for outcome, count in sorted(report.done.items())]
    reasons = Counter(skip.reason.value for skip in report.skipped)
    rows += [[f"skipped: {reason}", f"{count:,}"] for reason, count in sorted(reasons.items())]
    lines = [render.table(["outcome", "jobs"], rows or [["(none)", "0"]])]
    lines.append(f"{report.acted:,} of {report.matched:,} matched jobs {verb} changed.")
    if report.more:
        lines.append("More jobs match: raise --limit (at most 1000) or run it again.")
    if report.dry_run:
        lines.append("Dry run: nothing changed.")
    for skip in report.skipped[:20]:
        lines.append(f"  {skip.id}  {skip.reason.value}: {skip.detail}")
    if len(report.skipped) > 20:
        lines.append(f"  ... and {len(report.skipped) - 20:,} more skipped (--json lists all)")
    return "\n".join(lines)


def bulk(args: argparse.Namespace, settings: CliSettings) -> int:
    """Retry, cancel or delete many jobs of an org."""
    action = BulkAction(args.action)
    selection = _selection(args)
    with db.service(settings) as svc:
        report = run_bulk(svc, args.org, action, selection, dry_run=args.dry_run)
    if args.json:
        document = {
            "action": report.action.value,
            "dry_run": report.dry_run,
            "matched": report.matched,
            "more": report.more,
            "acted": report.acted,
            "done": dict(report.done),
            "skipped": [
                {"id": str(s.id), "reason": s.reason.value, "detail": s.detail}
                for s in report.skipped
            ],
        }
        print(json.dumps(document, indent=2))
    else:
        print(report_table(report))
    return 0
