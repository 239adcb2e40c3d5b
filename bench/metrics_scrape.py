"""What a Prometheus scrape of ``/metrics`` costs with a big history (issue 24, item 2).

    uv run python -m bench.metrics_scrape                      # 1,000,000 finished rows
    uv run python -m bench.metrics_scrape --rows 10000 --scrapes 20   # a seconds-long smoke run

On a database of its own (created, migrated, dropped at the end), against the server of
``--pg-url`` (default ``JOBS_BENCH_PG_URL`` or the machine's):

1. ``--rows`` finished jobs spread over 30 days (one ``generate_series`` insert, one in 50
   failed), one attempt record each, and ``--live`` live jobs over ``--types`` types (a third
   running, a tenth scheduled later, the rest queued); ``VACUUM ANALYZE``.
2. ``--scrapes`` scrapes, each timed in two parts as the API's ``GET /metrics`` runs them: the
   gauges' read (``PostgresJobStore.active_counts``, one grouped statement over the live rows)
   and the text exposition (``jobs_metrics.exposition``). The HTTP layer is not in the figure
   (the operator check and the response are the same for every route).
3. The statement's plan (``EXPLAIN (ANALYZE, BUFFERS)``): which index it read, how many rows and
   buffers — the point is that the finished rows are never read.

Nothing is asserted; a table is printed and the figures are written to
``bench/results/raw/metrics-scrape-<stamp>.json`` (git-ignored; the summary is
``bench/results/metrics-scrape.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.common import drop_database, percentile, recreate_database, rounded, server_facts

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"
DEFAULT_SERVER = os.environ.get(
    "JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)

HISTORY = """
INSERT INTO jobs (id, org_id, type, status, attempts, max_attempts, dedup_scope, payload, error,
                  created_at, run_at, started_at, finished_at)
SELECT uuidv7(), 'org-' || (i %% 50), 'type-' || (i %% %(types)s),
       CASE WHEN i %% 50 = 0 THEN 'failed' ELSE 'done' END, 1, 3, 'queue',
       jsonb_build_object('k', i), CASE WHEN i %% 50 = 0 THEN 'RuntimeError: boom' END,
       t, t, t + interval '1 second', t + interval '2 seconds'
FROM (SELECT i, now() - interval '30 days' + (i * interval '30 days' / %(rows)s) AS t
      FROM generate_series(1, %(rows)s) AS i) AS h
"""

ATTEMPTS = """
INSERT INTO job_attempts (job_id, attempt, started_at, ended_at, worker, outcome, error)
SELECT id, 1, started_at, finished_at, 'bench-worker',
       CASE WHEN status = 'failed' THEN 'failed' ELSE 'done' END, error
FROM jobs WHERE status IN ('done', 'failed')
"""

LIVE = """
INSERT INTO jobs (id, org_id, type, status, attempts, max_attempts, dedup_scope, payload,
                  created_at, run_at, started_at, lease, heartbeat_at)
SELECT uuidv7(), 'org-' || (i %% 50), 'type-' || ((i / 3) %% %(types)s),
       CASE WHEN i %% 3 = 0 THEN 'running' ELSE 'queued' END,
       CASE WHEN i %% 3 = 0 THEN 1 ELSE 0 END, 3, 'queue', jsonb_build_object('k', -i),
       now(), CASE WHEN i %% 10 = 1 THEN now() + interval '1 hour' ELSE now() END,
       CASE WHEN i %% 3 = 0 THEN now() END, CASE WHEN i %% 3 = 0 THEN gen_random_uuid() END,
       CASE WHEN i %% 3 = 0 THEN now() END
FROM generate_series(1, %(live)s) AS i
"""


def fill(url: str, rows: int, live: int, types: int) -> float:
    """The history, its attempts and the live jobs; seconds taken."""
    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        print(f"  history: {rows:,} finished jobs ...", flush=True)
        conn.execute(HISTORY, {"rows": rows, "types": types})
        print("  history: their attempt records ...", flush=True)
        conn.execute(ATTEMPTS)
        print(f"  live: {live:,} queued, running and scheduled jobs ...", flush=True)
        conn.execute(LIVE, {"live": live, "types": types})
        print("  VACUUM ANALYZE ...", flush=True)
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("VACUUM ANALYZE job_attempts")
    return time.perf_counter() - began


def scrape(url: str, scrapes: int) -> dict[str, Any]:
    """``scrapes`` timed scrapes: the gauges' read and the exposition, milliseconds."""
    from jobs_core.clock import SystemClock
    from jobs_metrics import exposition
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    engine = create_engine(url)
    store = PostgresJobStore(engine)
    clock = SystemClock()
    reads: list[float] = []
    renders: list[float] = []
    size = 0
    series = 0
    try:
        store.active_counts(clock.now())  # the pool's first connection, outside the figures
        for done in range(1, scrapes + 1):
            t0 = time.perf_counter()
            counts = store.active_counts(clock.now())
            t1 = time.perf_counter()
            body = exposition(counts)
            t2 = time.perf_counter()
            reads.append((t1 - t0) * 1000)
            renders.append((t2 - t1) * 1000)
            size, series = len(body), len(counts)
            if done % max(1, scrapes // 5) == 0:
                print(f"  scrapes: {done}/{scrapes}", flush=True)
    finally:
        engine.dispose()
    totals = [r + e for r, e in zip(reads, renders, strict=True)]
    return {
        "read_ms": _summary(reads),
        "exposition_ms": _summary(renders),
        "scrape_ms": _summary(totals),
        "gauge_series": series,
        "body_bytes": size,
    }


def plan(url: str) -> list[str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of the gauges' statement."""
    from jobs_postgres.attempt_tables import ACTIVE_COUNTS

    statement = str(ACTIVE_COUNTS).replace(":now", "now()")
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {statement}").fetchall()
    return [str(row[0]) for row in rows]


def _summary(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": rounded(percentile(values, 50), 2),
        "p95": rounded(percentile(values, 95), 2),
        "max": rounded(max(values), 2) if values else None,
    }


def report_md(result: dict[str, Any]) -> str:
    """The result as the Markdown table of bench/results/metrics-scrape.md."""
    p = result["params"]
    lines = [
        f"{p['rows']:,} finished jobs (and as many attempt records), {p['live']:,} live jobs "
        f"over {p['types']} types, {p['scrapes']} scrapes; milliseconds:",
        "",
        "| part | p50 | p95 | max |",
        "| --- | --- | --- | --- |",
    ]
    for key, label in (
        ("read_ms", "gauges' read (one statement)"),
        ("exposition_ms", "text exposition"),
        ("scrape_ms", "the scrape (both)"),
    ):
        s = result[key]
        lines.append(f"| {label} | {s['p50']} | {s['p95']} | {s['max']} |")
    lines += [
        "",
        f"{result['gauge_series']} gauge series, a body of {result['body_bytes']:,} bytes. "
        f"The plan of the read:",
        "",
        "```",
        *result["plan"],
        "```",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.metrics_scrape",
        description="What a scrape of /metrics costs with a big history (issue 24).",
    )
    parser.add_argument("--pg-url", default=DEFAULT_SERVER, help="a server to create on")
    parser.add_argument("--rows", type=int, default=1_000_000, help="finished jobs (1,000,000)")
    parser.add_argument("--live", type=int, default=10_000, help="live jobs (10,000)")
    parser.add_argument("--types", type=int, default=20, help="job types (20)")
    parser.add_argument("--scrapes", type=int, default=100, help="timed scrapes (100)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    args = parser.parse_args(argv)
    for name in ("rows", "live", "types", "scrapes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")

    from jobs_postgres import migrations

    dbname = f"bench_metrics_scrape_{os.getpid()}"
    url = recreate_database(args.pg_url, dbname)
    try:
        print(f"database {dbname}: migrating", flush=True)
        migrations.upgrade(url)
        fill_s = fill(url, args.rows, args.live, args.types)
        result: dict[str, Any] = {
            "started": datetime.now(UTC).isoformat(),
            "params": {k: v for k, v in vars(args).items() if k not in ("pg_url", "out")},
            "server": dict(server_facts(args.pg_url)),
            "fill_s": round(fill_s, 1),
            **scrape(url, args.scrapes),
            "plan": plan(url),
        }
    finally:
        drop_database(args.pg_url, dbname)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"metrics-scrape-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(report_md(result))
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
