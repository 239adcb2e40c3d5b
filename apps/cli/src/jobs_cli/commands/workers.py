"""``jobs workers``: the live worker processes, for operators (tenants never see them)."""

from __future__ import annotations

import argparse
import json

from jobs_core.clock import SystemClock

from jobs_cli import db, render
from jobs_cli.settings import CliSettings


def workers(args: argparse.Namespace, settings: CliSettings) -> int:
    """List the live workers, oldest first."""
    now = SystemClock().now()
    with db.reads(settings) as reads:
        live = reads.live_workers(now)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": str(w.id),
                        "host": w.host,
                        "pid": w.pid,
                        "types": list(w.types),
                        "concurrency": w.concurrency,
                        "started_at": w.started_at.isoformat(),
                        "last_seen_at": w.last_seen_at.isoformat(),
                    }
                    for w in live
                ],
                indent=2,
            )
        )
        return 0
    if not live:
        print("no live worker: start one with `jobs worker` (or `python -m jobs_worker`)")
        return 0
    rows = [
        [
            w.host,
            str(w.pid),
            str(w.concurrency),
            render.human_duration((now - w.started_at).total_seconds()) + " ago",
            render.human_duration(max(0.0, (now - w.last_seen_at).total_seconds())) + " ago",
            ", ".join(w.types) or "-",
        ]
        for w in live
    ]
    print(render.table(["HOST", "PID", "SLOTS", "STARTED", "SEEN", "TYPES"], rows))
    print(f"{len(live)} live worker{'s' if len(live) != 1 else ''}")
    return 0
