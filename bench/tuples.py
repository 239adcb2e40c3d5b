"""Dead tuples and size of ``jobs`` after a full drain, for this tree and another (issue 22).

    uv run python -m bench.tuples --b /path/to/main-worktree --n 100000 --concurrency 10

For each tree (this one, then ``--b``), in a fresh database: ``--n`` no-op jobs enqueued in one
bulk call, ONE worker process of that tree (``python -m bench.run worker``) drains them, then
``pg_stat_user_tables`` and the relation sizes of ``jobs`` (heap, indexes, total) and of
``job_events`` are read, with no vacuum in between (the stats are flushed first). This is what a
sustained full load leaves for autovacuum to clean: dead tuples per job, how many updates were
HOT (they leave no index entry behind), and what the table and its indexes weigh. Nothing is
asserted; the database is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common import drop_database, recreate_database

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PG = os.environ.get("JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

_FILL = """
import sys
from bench import wiring
from bench.common import NOOP, ORG, make_registry, payloads
url, n = sys.argv[1], int(sys.argv[2])
wiring.migrate(url)
with wiring.service(url, make_registry(lambda key: None)) as service:
    service.enqueue_many(ORG, NOOP, payloads(range(n)))
"""

_STATS = """
SELECT s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_dead_tup, s.n_live_tup,
       pg_relation_size('jobs'), pg_indexes_size('jobs'), pg_total_relation_size('jobs'),
       pg_total_relation_size('job_events')
FROM pg_stat_user_tables AS s WHERE s.relname = 'jobs'
"""


def measure(root: Path, pg_url: str, n: int, concurrency: int) -> dict[str, Any]:
    """One fill, drain and reading of the stats with the tree at ``root``."""
    python = str(root / ".venv" / "bin" / "python")
    url = recreate_database(pg_url, "jobs_bench_tuples")
    try:
        subprocess.run([python, "-c", _FILL, url, str(n)], cwd=root, check=True)
        with tempfile.TemporaryDirectory() as work:
            env = {**os.environ, "JOBS_BENCH_EXEC_FILE": str(Path(work) / "exec.log")}
            began = time.perf_counter()
            command = ["-m", "bench.run", "worker", "--database-url", url]
            worker = subprocess.Popen(
                [python, *command, "--concurrency", str(concurrency)],
                cwd=root,
                env=env,
                stderr=subprocess.DEVNULL,
            )
            try:
                with psycopg.connect(url, autocommit=True) as conn:
                    unfinished = "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')"
                    while True:
                        row = conn.execute(unfinished).fetchone()
                        if row is not None and row[0] == 0:
                            break
                        if worker.poll() is not None:
                            raise RuntimeError(f"the worker of {root} exited: {worker.returncode}")
                        time.sleep(0.1)
            finally:
                drained = time.perf_counter() - began
                worker.send_signal(signal.SIGTERM)
                worker.wait(60)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
            time.sleep(0.7)  # the other backends' counters reach the shared stats
            row = conn.execute(_STATS).fetchone()
        assert row is not None
        ins, upd, hot, dead, live, heap, indexes, total, events = row
        return {
            "tree": str(root),
            "n": n,
            "concurrency": concurrency,
            "drain_s": round(drained, 2),
            "updates": upd,
            "hot_updates": hot,
            "dead_tuples": dead,
            "dead_per_job": round(dead / n, 2),
            "live_tuples": live,
            "heap_mb": round(heap / 2**20, 1),
            "indexes_mb": round(indexes / 2**20, 1),
            "total_mb": round(total / 2**20, 1),
            "job_events_mb": round(events / 2**20, 1),
            "inserted": ins,
        }
    finally:
        drop_database(pg_url, "jobs_bench_tuples")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tuples", description=__doc__)
    parser.add_argument("--b", type=Path, help="another tree to measure after this one")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--pg-url", default=DEFAULT_PG)
    args = parser.parse_args(argv)
    trees = [ROOT] + ([args.b.resolve()] if args.b else [])
    results = []
    for root in trees:
        print(f"measuring {root} (n={args.n}, c{args.concurrency})", file=sys.stderr, flush=True)
        results.append(measure(root, args.pg_url, args.n, args.concurrency))
    print(json.dumps(results, indent=2))
    keys = [k for k in results[0] if k not in ("tree", "n", "concurrency")]
    print("\n| figure | " + " | ".join(r["tree"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for key in keys:
        print(f"| {key} | " + " | ".join(str(r[key]) for r in results) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
