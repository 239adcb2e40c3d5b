"""The health of the jobs table for an operator (``jobs doctor``): facts read from the
statistics views, each with plain advice.

- queue depth and the oldest queued job per type (the queue index);
- dead tuples, a bloat estimate and the last (auto)vacuum/analyze of ``jobs``;
- what holds vacuum back: transactions open for long (idle in transaction included), old
  prepared transactions, replication slots holding an old xmin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from jobs_postgres.errors import unavailable_as_store_error

LONG_TRANSACTION = timedelta(minutes=5)
"""A transaction open longer than this holds back vacuum of every row deleted since it began."""
DEAD_RATIO_WARN = 0.2

QUEUE = text(
    """SELECT type, count(*) AS depth, min(created_at) AS oldest
    FROM jobs WHERE status = 'queued' GROUP BY type ORDER BY depth DESC, type"""
)
RUNNING = text("SELECT count(*) FROM jobs WHERE status = 'running'")
TABLE = text(
    """SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum, last_analyze,
        last_autoanalyze, autovacuum_count, vacuum_count,
        pg_table_size('jobs') AS table_bytes, pg_indexes_size('jobs') AS index_bytes,
        (SELECT current_setting('block_size')::int) AS block_size,
        (SELECT relpages FROM pg_class WHERE oid = 'jobs'::regclass) AS relpages,
        (SELECT reltuples FROM pg_class WHERE oid = 'jobs'::regclass) AS reltuples
    FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"""
)
# The average width of a row, from the planner's statistics (null before the first ANALYZE).
ROW_WIDTH = text(
    """SELECT sum(avg_width) FROM pg_stats
    WHERE schemaname = current_schema() AND tablename = 'jobs'"""
)
HOLDERS = text(
    """SELECT pid, usename, application_name, state, xact_start, now() - xact_start AS age,
        left(query, 80) AS query
    FROM pg_stat_activity
    WHERE pid <> pg_backend_pid() AND xact_start IS NOT NULL
      AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL
           OR state LIKE 'idle in transaction%')
    ORDER BY xact_start NULLS LAST"""
)
PREPARED = text(
    "SELECT gid, prepared, now() - prepared AS age, owner, database FROM pg_prepared_xacts"
)
SLOTS = text(
    """SELECT slot_name, slot_type, active, xmin, catalog_xmin, age(xmin) AS xmin_age
    FROM pg_replication_slots"""
)


@dataclass(slots=True)
class Finding:
    """One fact and what to do about it; ``level`` is ok, warn or bad."""

    level: str
    subject: str
    fact: str
    advice: str = ""


@dataclass(slots=True)
class Health:
    """Everything ``jobs doctor`` reports."""

    queue: list[tuple[str, int, datetime]] = field(default_factory=list)
    running: int = 0
    table: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``jobs doctor --json``)."""
        return {
            "queue": [{"type": t, "depth": d, "oldest": o.isoformat()} for t, d, o in self.queue],
            "running": self.running,
            "table": {
                k: v.isoformat() if isinstance(v, datetime) else v for k, v in self.table.items()
            },
            "findings": [
                {"level": f.level, "subject": f.subject, "fact": f.fact, "advice": f.advice}
                for f in self.findings
            ],
        }


def examine(engine: Engine) -> Health:
    """Read the facts and judge them."""
    health = Health()
    with unavailable_as_store_error(), engine.connect() as conn:
        now: datetime = conn.execute(text("SELECT now()")).scalar_one()
        health.queue = [(r.type, r.depth, r.oldest) for r in conn.execute(QUEUE)]
        health.running = int(conn.execute(RUNNING).scalar_one())
        row = conn.execute(TABLE).one()
        width = conn.execute(ROW_WIDTH).scalar_one_or_none()
        holders = conn.execute(HOLDERS).all()
        prepared = conn.execute(PREPARED).all()
        slots = conn.execute(SLOTS).all()
        autovacuum = conn.execute(text("SHOW autovacuum")).scalar_one()
    table = dict(row._mapping)
    live, dead = int(table["n_live_tup"] or 0), int(table["n_dead_tup"] or 0)
    table["dead_ratio"] = round(dead / (live + dead), 4) if live + dead else 0.0
    table["bloat_bytes_estimate"] = _bloat(table, width)
    health.table = table
    table["autovacuum"] = autovacuum
    if autovacuum != "on":
        health.findings.append(
            Finding(
                "bad",
                "autovacuum",
                "off on this server",
                "a queue table needs it: set autovacuum = on in postgresql.conf and reload "
                "(until then run VACUUM ANALYZE jobs often)",
            )
        )
    _judge_queue(health, now)
    _judge_table(health, table, live, dead)
    _judge_holders(health, holders, prepared, slots)
    return health


def _bloat(table: dict[str, Any], width: float | None) -> int | None:
    """Table bytes beyond what the live rows need at the table's fillfactor (70 %), from the
    planner's row width: an estimate (pgstattuple gives the exact figure)."""
    if not width:
        return None
    needed = (float(table["reltuples"] or 0) * (float(width) + 28)) / 0.7  # 28: tuple header
    return max(int(table["table_bytes"] - needed), 0)


def _judge_queue(health: Health, now: datetime) -> None:
    for type_name, depth, oldest in health.queue:
        waited = now - oldest
        level = "warn" if waited > timedelta(minutes=10) else "ok"
        health.findings.append(
            Finding(
                level,
                f"queue {type_name}",
                f"{depth} queued, oldest waiting {_human(waited)}",
                "no worker runs this type, or too few: start workers that register it, or "
                "raise --concurrency"
                if level == "warn"
                else "",
            )
        )


def _judge_table(health: Health, table: dict[str, Any], live: int, dead: int) -> None:
    ratio = table["dead_ratio"]
    level = "warn" if ratio > DEAD_RATIO_WARN and dead > 10_000 else "ok"
    health.findings.append(
        Finding(
            level,
            "dead tuples",
            f"{dead} dead / {live} live ({ratio:.1%})",
            "autovacuum is not keeping up: look below for what holds it back; run VACUUM "
            "(ANALYZE) jobs once by hand"
            if level == "warn"
            else "",
        )
    )
    last = max(
        (t for t in (table["last_autovacuum"], table["last_vacuum"]) if t is not None),
        default=None,
    )
    health.findings.append(
        Finding(
            "ok" if last is not None or dead < 10_000 else "warn",
            "last vacuum",
            "never" if last is None else last.isoformat(timespec="seconds"),
            "" if last is not None or dead < 10_000 else "check autovacuum is on (SHOW autovacuum)",
        )
    )
    analyzed = max(
        (t for t in (table["last_autoanalyze"], table["last_analyze"]) if t is not None),
        default=None,
    )
    health.findings.append(
        Finding(
            "ok" if analyzed is not None else "warn",
            "last analyze",
            "never" if analyzed is None else analyzed.isoformat(timespec="seconds"),
            "" if analyzed is not None else "run ANALYZE jobs so the planner knows the table",
        )
    )
    bloat = table["bloat_bytes_estimate"]
    if bloat is not None and table["table_bytes"] and bloat > 0.5 * table["table_bytes"]:
        health.findings.append(
            Finding(
                "warn",
                "bloat",
                f"~{_bytes(bloat)} of {_bytes(table['table_bytes'])} is free space",
                "space is reused by new rows; to give it back to the OS use pg_repack (online) "
                "or VACUUM FULL jobs (locks the table)",
            )
        )


def _judge_holders(health: Health, holders: Any, prepared: Any, slots: Any) -> None:
    blocking = [h for h in holders if h.age is not None and h.age > LONG_TRANSACTION]
    for h in blocking:
        idle = h.state == "idle in transaction"
        health.findings.append(
            Finding(
                "bad",
                f"session {h.pid}",
                f"{h.state} for {_human(h.age)} ({h.application_name or h.usename}): {h.query!r}",
                (
                    "an idle transaction: fix the client that leaves it open, set "
                    "idle_in_transaction_session_timeout, or end it: SELECT pg_terminate_backend"
                    f"({h.pid})"
                )
                if idle
                else f"a long transaction holds back vacuum; if it is stuck: SELECT "
                f"pg_cancel_backend({h.pid})",
            )
        )
    if not blocking:
        health.findings.append(
            Finding("ok", "long transactions", f"none open longer than {_human(LONG_TRANSACTION)}")
        )
    for p in prepared:
        health.findings.append(
            Finding(
                "bad" if p.age > LONG_TRANSACTION else "warn",
                f"prepared transaction {p.gid}",
                f"prepared {_human(p.age)} ago by {p.owner} in {p.database}",
                f"finish it: COMMIT PREPARED '{p.gid}' or ROLLBACK PREPARED '{p.gid}'",
            )
        )
    for s in slots:
        holds = s.xmin is not None or s.catalog_xmin is not None
        health.findings.append(
            Finding(
                "bad" if holds and not s.active else "ok",
                f"replication slot {s.slot_name}",
                f"{s.slot_type}, {'active' if s.active else 'inactive'}"
                + (f", holds xmin {s.xmin_age} transactions back" if s.xmin is not None else ""),
                f"an unused slot holds back vacuum: SELECT pg_drop_replication_slot("
                f"'{s.slot_name}')"
                if holds and not s.active
                else "",
            )
        )


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def _bytes(value: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
