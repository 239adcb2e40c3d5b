"""``jobs schedule``, ``jobs settings``, ``jobs purge`` and ``jobs doctor`` (issue 17).

The CLI talks to the database directly: whoever runs it is an operator (decision 0018).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from jobs_core import Registry, SystemClock
from jobs_core.retention import RetentionInvalid, RetentionSettings, policies
from jobs_core.retention import purge as run_purge
from jobs_core.schedules import MissedPolicy, Schedule, ScheduleState
from jobs_core.scheduling import ScheduleService

from jobs_cli import db, render
from jobs_cli.commands.jobs import parse_payload
from jobs_cli.errors import CliError, UsageError
from jobs_cli.settings import CliSettings


@contextmanager
def _schedules(settings: CliSettings) -> Iterator[ScheduleService]:
    from jobs_postgres.cron import CronsimCron
    from jobs_postgres.schedules import PostgresScheduleStore
    from jobs_worker.scheduler import Maintenance

    from jobs_cli.registries import build_registry

    with db.engine(settings) as engine:
        registry = Registry("cli")
        registry.include(build_registry(settings, engine))
        registry.include(Maintenance().registry)
        yield ScheduleService(PostgresScheduleStore(engine), registry, CronsimCron(), SystemClock())


def schedule_help(args: argparse.Namespace, settings: CliSettings) -> int:
    """``jobs schedule`` alone: the usage."""
    raise UsageError("jobs schedule: say what to do: add, ls, rm, pause, resume, run")


def _state_json(state: ScheduleState) -> dict[str, Any]:
    s = state.schedule
    return {
        "name": s.name,
        "org": s.org_id,
        "type": s.job_type,
        "cron": s.cron,
        "timezone": s.timezone,
        "payload": dict(s.payload),
        "enabled": s.enabled,
        "missed": s.missed.value,
        "max_catchup": s.max_catchup,
        "source": state.source,
        "next_run_at": state.next_run_at.isoformat(),
        "last_run_at": None if state.last_run_at is None else state.last_run_at.isoformat(),
        "last_job_id": None if state.last_job_id is None else str(state.last_job_id),
    }


def _when(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "-"
    delta = (value - now).total_seconds()
    word = render.human_duration(abs(delta))
    return (
        f"{value.isoformat(timespec='seconds')} ({'in ' + word if delta >= 0 else word + ' ago'})"
    )


def schedule_add(args: argparse.Namespace, settings: CliSettings) -> int:
    """Create a schedule."""
    schedule = Schedule(
        name=args.name,
        org_id=args.org.strip(),
        job_type=args.type,
        cron=args.cron,
        timezone=args.tz,
        payload=parse_payload(args.payload),
        enabled=not args.paused,
        missed=MissedPolicy(args.missed),
        max_catchup=args.max_catchup,
        description=args.description,
    )
    with _schedules(settings) as service:
        state = service.create(schedule)
    print(f"schedule {state.schedule.name} created for org {state.schedule.org_id}")
    print(f"next run: {_when(state.next_run_at, SystemClock().now())}")
    return 0


def schedule_ls(args: argparse.Namespace, settings: CliSettings) -> int:
    """List schedules."""
    with _schedules(settings) as service:
        states = service.list_schedules(args.org)
    if args.json:
        print(json.dumps([_state_json(s) for s in states], indent=2))
        return 0
    if not states:
        print("no schedules" + (f" for org {args.org}" if args.org else ""))
        return 0
    now = SystemClock().now()
    rows = [
        [
            s.schedule.org_id,
            s.schedule.name,
            s.schedule.job_type,
            f"{s.schedule.cron} {s.schedule.timezone}",
            "on" if s.schedule.enabled else "paused",
            s.schedule.missed.value,
            _when(s.next_run_at, now) if s.schedule.enabled else "-",
            _when(s.last_run_at, now),
            str(s.last_job_id or "-"),
            s.source,
        ]
        for s in states
    ]
    headers = ["ORG", "NAME", "TYPE", "CRON", "STATE", "MISSED", "NEXT RUN", "LAST RUN", "LAST JOB"]
    print(render.table([*headers, "FROM"], rows))
    return 0


def schedule_rm(args: argparse.Namespace, settings: CliSettings) -> int:
    """Delete a schedule."""
    with _schedules(settings) as service:
        service.remove(args.org, args.name)
    print(f"schedule {args.name} removed")
    return 0


def schedule_pause(args: argparse.Namespace, settings: CliSettings) -> int:
    """Pause a schedule."""
    with _schedules(settings) as service:
        service.pause(args.org, args.name)
    print(f"schedule {args.name} paused")
    return 0


def schedule_resume(args: argparse.Namespace, settings: CliSettings) -> int:
    """Resume a schedule."""
    with _schedules(settings) as service:
        state = service.resume(args.org, args.name)
    print(
        f"schedule {args.name} resumed; next run: {_when(state.next_run_at, SystemClock().now())}"
    )
    return 0


def schedule_run(args: argparse.Namespace, settings: CliSettings) -> int:
    """Enqueue a schedule's job now; the job id on the last line."""
    with _schedules(settings) as service:
        _, job = service.run_now(args.org, args.name)
    print(f"enqueued {job.type} job for org {job.org_id} from schedule {args.name}")
    print(job.id)
    return 0


# -- settings ---------------------------------------------------------------------------------
def _settings_store(engine: Any) -> Any:
    from jobs_postgres.retention import PostgresSettingsStore

    return PostgresSettingsStore(engine)


def settings_show(args: argparse.Namespace, settings: CliSettings) -> int:
    """Print the run-time retention settings and the policy each type gets."""
    with db.engine(settings) as engine:
        current = _settings_store(engine).load()
        registry = _full_registry(settings, engine)
    if args.json:
        print(json.dumps(current.to_dict(), indent=2))
        return 0
    print(_describe(current, registry))
    return 0


def _full_registry(settings: CliSettings, engine: Any) -> Registry:
    from jobs_worker.scheduler import Maintenance

    from jobs_cli.registries import build_registry

    registry = Registry("cli")
    registry.include(build_registry(settings, engine))
    registry.include(Maintenance().registry)
    return registry


def _describe(current: RetentionSettings, registry: Registry) -> str:
    lines = [
        f"purge: {'on' if current.purge_enabled else 'off'} "
        f"(schedule {current.purge_cron} {current.purge_timezone}, "
        f"batches of {current.batch_size})",
        "default policy: "
        + (
            "none (keep every job)"
            if current.default_policy is None
            else _policy(current.default_policy.to_dict())
        ),
    ]
    applied = policies(registry, current)
    rows = []
    for job_type in registry:
        policy = applied.get(job_type.name)
        where = (
            "protected"
            if job_type.protected
            else "override"
            if job_type.name in current.per_type
            else "declared"
            if policy is not None and policy != current.default_policy
            else "default"
            if policy is not None
            else "-"
        )
        rows.append(
            [job_type.name, "keep all" if policy is None else _policy(policy.to_dict()), where]
        )
    lines += ["", render.table(["TYPE", "POLICY", "FROM"], rows)]
    return "\n".join(lines)


def _policy(values: dict[str, Any]) -> str:
    parts = []
    if values.get("max_age_days") is not None:
        parts.append(f"max age {values['max_age_days']} d")
    if values.get("keep_done") is not None:
        parts.append(f"keep {values['keep_done']} done")
    if values.get("keep_failed") is not None:
        parts.append(f"keep {values['keep_failed']} failed")
    return ", ".join(parts) or "keep all"


def settings_set(args: argparse.Namespace, settings: CliSettings) -> int:
    """Change the run-time retention settings."""
    changes: dict[str, Any] = {}
    if args.purge is not None:
        changes["purge_enabled"] = args.purge == "on"
    if args.batch_size is not None:
        changes["batch_size"] = args.batch_size
    if args.purge_cron is not None:
        from jobs_postgres.cron import CronsimCron

        CronsimCron().check(args.purge_cron, "UTC")
        changes["purge_cron"] = args.purge_cron
    with db.engine(settings) as engine:
        store = _settings_store(engine)
        current: RetentionSettings = store.load()
        data = current.to_dict()
        default = [args.default_max_age_days, args.default_keep_done, args.default_keep_failed]
        if any(v is not None for v in default):
            policy = dict(data["default_policy"] or {})
            for key, value in zip(
                ("max_age_days", "keep_done", "keep_failed"), default, strict=True
            ):
                if value is not None:
                    policy[key] = None if value == 0 and key == "max_age_days" else value
            changes["default_policy"] = policy
        if args.type is not None:
            per_type = dict(data["per_type"])
            if args.clear:
                per_type.pop(args.type, None)
            else:
                policy = dict(per_type.get(args.type) or {})
                for key in ("max_age_days", "keep_done", "keep_failed"):
                    value = getattr(args, key)
                    if value is not None:
                        policy[key] = value
                per_type[args.type] = policy
            changes["per_type"] = per_type
        elif args.clear or any(
            getattr(args, k) is not None for k in ("max_age_days", "keep_done", "keep_failed")
        ):
            raise UsageError("--max-age-days, --keep-done, --keep-failed and --clear need --type")
        if not changes:
            raise UsageError("nothing to change: see jobs settings set --help")
        try:
            updated = current.merged(changes)
        except RetentionInvalid as error:
            raise CliError(f"invalid setting: {error}") from None
        store.save(updated, by="cli")
        registry = _full_registry(settings, engine)
    print(_describe(updated, registry))
    return 0


# -- purge and doctor -------------------------------------------------------------------------
def purge(args: argparse.Namespace, settings: CliSettings) -> int:
    """Apply the retention policies now, printing each batch."""
    from jobs_postgres.retention import PostgresRetentionStore

    with db.engine(settings) as engine:
        current = _settings_store(engine).load()
        registry = _full_registry(settings, engine)
        if args.dry_run:
            print(_describe(current, registry))
            return 0
        removed = 0

        def progress(type_name: str, bucket: str, count: int) -> None:
            nonlocal removed
            removed += count
            print(f"  {type_name} {bucket}: -{count} (total {removed})", file=sys.stderr)

        report = run_purge(
            PostgresRetentionStore(engine),
            registry,
            current,
            SystemClock().now(),
            on_batch=progress,
        )
    if report.skipped:
        print(f"nothing purged: {report.skipped}")
        return 0
    rows = [
        [name, str(b.get("done", 0)), str(b.get("failed", 0))]
        for name, b in sorted(report.removed.items())
    ]
    print(render.table(["TYPE", "DONE", "FAILED+CANCELLED"], rows) if rows else "nothing to purge")
    print(f"removed {report.total} jobs in {report.batches} batches")
    return 0


def doctor(args: argparse.Namespace, settings: CliSettings) -> int:
    """The health of the jobs table, and the orgs near a quota; exit 1 when a finding is bad."""
    from jobs_postgres.health import Finding, examine

    from jobs_cli.commands.quotas import near_findings

    with db.engine(settings) as engine:
        health = examine(engine)
        # Orgs near a quota: a warning (the quota works; the operator may want to raise it).
        health.findings.extend(Finding("warn", *near) for near in near_findings(engine))
    if args.json:
        print(json.dumps(health.to_dict(), indent=2, default=str))
    else:
        t = health.table
        print(
            f"jobs table: {t['n_live_tup']} live rows, {t['n_dead_tup']} dead, "
            f"table {_mb(t['table_bytes'])}, indexes {_mb(t['index_bytes'])}, "
            f"{health.running} running"
        )
        print()
        rows = [
            [{"ok": "ok", "warn": "WARN", "bad": "BAD"}[f.level], f.subject, f.fact, f.advice]
            for f in health.findings
        ]
        print(render.table(["", "WHAT", "FACT", "ADVICE"], rows))
    return 1 if any(f.level == "bad" for f in health.findings) else 0


def _mb(value: int) -> str:
    return f"{value / 1024 / 1024:.1f} MB"
