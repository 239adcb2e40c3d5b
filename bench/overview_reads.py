"""The Overview's reads at a given history size (issue 24, item 4): ``type_counts``, ``series``
(hour and day), ``find_by_prefix`` and ``find_by_short_id`` of ``jobs_postgres.overview_rows``,
each timed over ``--repeat`` calls on a history of ``--rows`` finished jobs of one org (each with
one attempt record, at random instants of the last ``--hours``, five types), beside
``--other-rows`` jobs of another org (what an index scoped by org never reads).

    uv run python -m bench.overview_reads --server postgresql://postgres@127.0.0.1:5432/postgres \\
        --rows 1000000

On a database of its own (created, migrated, filled in SQL with ``generate_series``, dropped at
the end unless ``--keep``). Prints each read's median and p95 in milliseconds and, with
``--explain``, each plan. ``fill`` is also what seeds a demo database for the panel's pictures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from jobs_core import Status, SystemClock
from jobs_core.overview import Window
from jobs_postgres import migrations
from jobs_postgres.database import create_engine, drop_database, ensure_database, with_database
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

ORG = "bench-overview"
OTHER = "bench-other"
TYPES = ("import_csv", "import_api", "map_reconcile", "crawl_site", "send_report")

# Finished jobs at random instants of the last ``:hours`` hours, 2-10 % failed (by type), 2 %
# cancelled; each waited 0-40 s and ran 0.2-100 s (long tails: a few slow ones per bucket); one
# attempt record each.
FILL = text(
    """WITH made AS (
        SELECT uuidv7() AS id, n,
               (CAST(:types AS text[]))[1 + n % :ntypes] AS type,
               CASE WHEN n % 50 = 0 THEN 'cancelled'
                    WHEN (n / :ntypes) % 50 < 1 + n % :ntypes THEN 'failed'
                    ELSE 'done' END AS status,
               now() - make_interval(secs => random() * :hours * 3600) AS finished,
               0.2 + power(random(), 4) * 20 * (1 + n % :ntypes) AS ran,
               power(random(), 3) * 40 AS waited
        FROM generate_series(1, :rows) AS n
    ), inserted AS (
        INSERT INTO jobs (id, org_id, type, status, attempts, payload, created_at, run_at,
                          started_at, finished_at, error)
        SELECT id, :org, type, status, 1, jsonb_build_object('n', n),
               finished - make_interval(secs => ran + waited),
               finished - make_interval(secs => ran + waited),
               finished - make_interval(secs => ran), finished,
               CASE WHEN status = 'failed' THEN 'bench failure' END
        FROM made RETURNING id, status, started_at, finished_at
    )
    INSERT INTO job_attempts (job_id, attempt, started_at, ended_at, worker, outcome, error)
    SELECT id, 1, started_at, finished_at, 'bench:1', status,
           CASE WHEN status = 'failed' THEN 'bench failure' END
    FROM inserted"""
)


def fill(engine: Engine, org: str, rows: int, hours: float = 48.0) -> None:
    """Insert ``rows`` finished jobs of ``org`` with their attempt records (one statement)."""
    if rows <= 0:
        return
    params = {"types": list(TYPES), "ntypes": len(TYPES), "rows": rows, "hours": hours, "org": org}
    with engine.begin() as conn:
        conn.execute(FILL, params)
        conn.execute(text("ANALYZE jobs"))
        conn.execute(text("ANALYZE job_attempts"))


def timed(call: Callable[[], Any], repeat: int) -> dict[str, float]:
    """The median and p95 (ms) of ``repeat`` calls, after one warm-up call."""
    call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"median_ms": round(statistics.median(samples), 2), "p95_ms": round(p95, 2)}


def explain(engine: Engine, statement: str, params: dict[str, Any]) -> str:
    """The plan of ``statement`` as run (EXPLAIN ANALYZE, BUFFERS)."""
    with engine.connect() as conn:
        rows = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS) " + statement), params)
        return "\n".join(row[0] for row in rows)


def measure(engine: Engine, repeat: int, show_plans: bool) -> dict[str, dict[str, float]]:
    """Time each read on the filled database."""
    store = PostgresJobStore(engine)
    now = SystemClock().now()
    with engine.connect() as conn:
        sample = conn.execute(
            text("SELECT id FROM jobs WHERE org_id = :org ORDER BY id LIMIT 1 OFFSET 7"),
            {"org": ORG},
        ).scalar_one()
    reads: dict[str, Callable[[], Any]] = {
        "type_counts": lambda: store.type_counts(ORG, None, None),
        "type_counts_failed": lambda: store.type_counts(ORG, frozenset({Status.FAILED}), None),
        "series_hour": lambda: store.series(ORG, Window.HOUR, now),
        "series_day": lambda: store.series(ORG, Window.DAY, now),
        "find_by_prefix": lambda: store.find_by_prefix(ORG, sample.hex[:12], 11),
        "find_by_short_id": lambda: store.find_by_short_id(ORG, sample.hex[-8:], 11),
    }
    results = {name: timed(call, repeat) for name, call in reads.items()}
    if show_plans:
        from jobs_core.overview import EPOCH, window_start
        from jobs_postgres import overview_rows

        params = {
            "org_id": ORG,
            "bucket": Window.DAY.bucket,
            "origin": EPOCH,
            "start": window_start(Window.DAY, now),
        }
        print(explain(engine, overview_rows.SERIES.text, params), file=sys.stderr)
        short = {"org_id": ORG, "short": sample.hex[-8:], "limit": 11}
        print(explain(engine, overview_rows.BY_SHORT_ID.text, short), file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overview_reads", description=__doc__)
    parser.add_argument(
        "--server",
        default=os.environ.get(
            "JOBS_BENCH_SERVER", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a PostgreSQL server URL (a database of its own is created on it)",
    )
    parser.add_argument("--rows", type=int, default=10_000, help="finished jobs of the org")
    parser.add_argument(
        "--other-rows", type=int, default=None, help="jobs of another org (default: --rows)"
    )
    parser.add_argument(
        "--hours",
        type=float,
        default=720.0,
        help="how far back the history goes (default: 720, a month; the day's window holds "
        "1/30 of it)",
    )
    parser.add_argument("--repeat", type=int, default=20, help="timed calls of each read")
    parser.add_argument("--explain", action="store_true", help="print the plans (stderr)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args(argv)
    name = f"jobs_bench_overview_{os.getpid()}"
    ensure_database(args.server, name)
    url = with_database(args.server, name)
    try:
        migrations.upgrade(url)
        engine = create_engine(url)
        started = time.perf_counter()
        fill(engine, ORG, args.rows, args.hours)
        fill(engine, OTHER, args.rows if args.other_rows is None else args.other_rows, args.hours)
        filled_s = round(time.perf_counter() - started, 1)
        results = measure(engine, args.repeat, args.explain)
        engine.dispose()
    finally:
        if not args.keep:
            drop_database(args.server, name)
    summary = {"rows": args.rows, "hours": args.hours, "fill_s": filled_s, "reads": results}
    print(json.dumps(summary, indent=2))
    print(f"\n| read ({args.rows:,} jobs of the org) | median ms | p95 ms |")
    print("|---|---|---|")
    for read, figures in results.items():
        print(f"| {read} | {figures['median_ms']} | {figures['p95_ms']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
