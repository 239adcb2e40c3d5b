"""The fleet benchmark (issue 27, docs/scaling.md §6): N worker processes of S slots drain J jobs
on a PostgreSQL cluster of the benchmark's own (``pg_stat_statements`` preloaded), directly and
again through a PgBouncer in transaction mode whose pool holds at most ``--pool-size`` server
connections; then the drain rate as the number of workers grows, to find where adding workers
stops helping.

For each drain: throughput (jobs/s, first start to last start), the latency of the workers'
claim and finish-and-claim calls (p50/p99, timed in the worker processes), the peak of server
connections (``pg_stat_activity``, with and without the workers' idle ``LISTEN`` connections),
exactly once (every job's key recorded once), the top statements by server time and the wait
events seen on active backends.

    uv run python -m bench.fleet                      # 32 x 4, 200,000 jobs (a quiet machine)
    uv run python -m bench.fleet --tiny               # 4 x 2, 2,000 jobs: proves it runs

The cluster and the pooler live in a temporary directory on ports 5440-5449 and are removed at
the end (``bench.cluster``). Results: ``<out>/fleet-<time>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cluster
from bench.common import (
    EXEC_FILE_ENV,
    NOOP,
    ORG,
    RecordTail,
    exactly_once,
    latency_summary,
    payloads,
    read_records,
    rounded,
)
from bench.fleet_report import write_report
from bench.fleet_support import (
    TIMINGS_ENV,
    Sampler,
    ceiling,
    read_timings,
    reset_statements,
    top_statements,
)

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "fleet"
ENQUEUE_BATCH = 10_000
DRAIN_TIMEOUT_S = 3600.0


def log(*parts: object) -> None:
    """One progress line on stderr."""
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Target:
    """Where a fleet's workers connect: directly, or through the pooler."""

    name: str
    env: dict[str, str]


class Fleet:
    """``workers`` worker processes of ``slots`` slots on ``target``, recording into a file."""

    def __init__(self, target: Target, workers: int, slots: int, workdir: Path) -> None:
        self.exec_file = workdir / "executed.txt"
        self.timing_files = [workdir / f"timings-{n}.json" for n in range(workers)]
        self.logs = [workdir / f"worker-{n}.log" for n in range(workers)]
        base = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")]))
        self.processes: list[subprocess.Popen[bytes]] = []
        for n in range(workers):
            env = {
                **base,
                **target.env,
                EXEC_FILE_ENV: str(self.exec_file),
                TIMINGS_ENV: str(self.timing_files[n]),
                "JOBS_LOG_LEVEL": "WARNING",
                "PGAPPNAME": "jobs-fleet",
            }
            with self.logs[n].open("wb") as out:
                command = [sys.executable, "-m", "bench.fleet", "worker", "--slots", str(slots)]
                self.processes.append(
                    subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
                )

    def wait_listening(self, admin_url: str, expected: int, timeout_s: float = 300) -> None:
        """Return once ``expected`` workers have started (their wake-up source is up: a LISTEN
        connection direct; a claim attempt through the pooler is seen as a connection)."""
        import psycopg

        deadline = time.monotonic() + timeout_s
        query = (
            "SELECT count(DISTINCT client_port) FROM pg_stat_activity "
            "WHERE datname = %s AND query ILIKE 'LISTEN%%'"
        )
        while True:
            self.check_alive()
            with psycopg.connect(admin_url, autocommit=True) as conn:
                row = conn.execute(query, (DATABASE,)).fetchone()
            if row is not None and int(row[0]) >= expected:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{row} of {expected} workers listening after {timeout_s} s")
            time.sleep(0.2)

    def check_alive(self) -> None:
        """Fail, with the end of its log, if a worker process has exited."""
        for process, path in zip(self.processes, self.logs, strict=True):
            if process.poll() is not None:
                tail = path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"a worker exited ({process.returncode}):\n{tail}")

    def stop(self) -> None:
        """SIGTERM every worker and wait (they write their timings as they exit)."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _empty(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE jobs, job_attempts, job_waits, job_wait_ends, job_events, job_workers"
        )
        conn.execute("VACUUM ANALYZE jobs")


def drain(admin_url: str, target: Target, workers: int, slots: int, jobs: int) -> dict[str, Any]:
    """One drain of ``jobs`` jobs by a fleet on ``target``; its figures."""
    from bench import wiring
    from bench.common import make_registry

    db_url = cluster_db_url(admin_url)
    _empty(db_url)
    reset_statements(admin_url)
    keys = [str(n) for n in range(jobs)]
    with tempfile.TemporaryDirectory(prefix="jobs-fleet-") as tmp:
        fleet = Fleet(target, workers, slots, Path(tmp))
        try:
            fleet.wait_listening(admin_url, workers)
            log(f"{target.name}: {workers} x {slots} listening; enqueueing {jobs:,}")
            tail = RecordTail(str(fleet.exec_file))
            with Sampler(admin_url, DATABASE) as sampler:
                with wiring.service(db_url, make_registry(lambda _: None)) as service:
                    for start in range(0, jobs, ENQUEUE_BATCH):
                        batch = payloads(keys[start : start + ENQUEUE_BATCH])
                        service.enqueue_many(ORG, NOOP, batch)
                deadline = time.monotonic() + DRAIN_TIMEOUT_S
                while tail.poll() < jobs:
                    fleet.check_alive()
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{tail.lines} of {jobs} ran in {DRAIN_TIMEOUT_S} s")
                    time.sleep(0.05)
                time.sleep(0.5)  # a duplicate run would show in this half second
        finally:
            fleet.stop()
        records = read_records(str(fleet.exec_file))
        timings = read_timings(fleet.timing_files)
    starts = sorted(at for _, at in records)
    span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
    result = {
        "target": target.name,
        "workers": workers,
        "slots": slots,
        "jobs": jobs,
        "jobs_per_s": rounded(jobs / span if span else None, 1),
        "drain_s": rounded(span, 2),
        "claim": latency_summary(timings.get("claim", [])),
        "finish_and_claim": latency_summary(timings.get("complete", [])),
        "calls": {name: len(values) for name, values in timings.items()},
        "server_connections_peak": sampler.peak,
        "exactly_once": exactly_once(records, set(keys)),
        "wait_events": sampler.wait_events(),
        "top_statements": top_statements(admin_url, DATABASE),
    }
    log(f"{target.name}: {result['jobs_per_s']} jobs/s, connections {sampler.peak}")
    return result


def cluster_db_url(admin_url: str) -> str:
    """The fleet database's URL on the cluster of ``admin_url``."""
    return admin_url.rsplit("/", 1)[0] + f"/{DATABASE}"


def steps_up_to(workers: int) -> list[int]:
    """1, 2, 4, ... up to ``workers`` (which is always the last step)."""
    steps = [1]
    while steps[-1] * 2 < workers:
        steps.append(steps[-1] * 2)
    return sorted({*steps, workers})


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark; its results."""
    from bench import wiring

    reason = cluster.missing(pooler=True, server=True)
    if reason is not None:
        raise SystemExit(f"bench.fleet cannot run here: {reason}")
    settings = {
        "shared_preload_libraries": "'pg_stat_statements'",
        # A worker process holds up to ~6 connections (its pool, LISTEN, the API-less helpers);
        # the last fleet's are still closing when the next step starts: room for both.
        "max_connections": str(max(300, args.workers * 8 + 50)),
        "fsync": "on",
        "shared_buffers": "'256MB'",
    }
    with cluster.Cluster(settings=settings) as server:
        server.start()
        admin = server.url()
        import psycopg

        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        direct_url = cluster_db_url(admin)
        wiring.migrate(direct_url)
        with cluster.Bouncer(admin, pool_size=args.pool_size) as bouncer:
            direct = Target("direct", {"JOBS_DATABASE_URL": direct_url})
            pooled = Target(
                f"pgbouncer (pool {args.pool_size})",
                {
                    "JOBS_DATABASE_URL": bouncer.url(DATABASE),
                    "JOBS_DATABASE_POOLER": "transaction",
                    "JOBS_DIRECT_DATABASE_URL": direct_url,
                },
            )
            fleets = [
                drain(admin, t, args.workers, args.slots, args.jobs) for t in (direct, pooled)
            ]
            steps: dict[str, list[dict[str, Any]]] = {}
            for target in (direct, pooled):
                steps[target.name] = [
                    drain(admin, target, n, args.slots, args.step_jobs)
                    for n in steps_up_to(args.workers)
                ]
    return {
        "command": " ".join(["python -m bench.fleet", *sys.argv[1:]]),
        "settings": vars(args),
        "fleets": fleets,
        "ceiling": {
            name: {"workers": ceiling(found), "steps": found} for name, found in steps.items()
        },
    }


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    parser.add_argument("--workers", type=int, default=32, help="worker processes (32)")
    parser.add_argument("--slots", type=int, default=4, help="slots per worker (4)")
    parser.add_argument("--jobs", type=int, default=200_000, help="jobs per fleet drain")
    parser.add_argument("--step-jobs", type=int, default=None, help="jobs per ceiling step")
    parser.add_argument("--pool-size", type=int, default=20, help="pgbouncer's server pool")
    parser.add_argument("--tiny", action="store_true", help="4 x 2, 2,000 jobs: a smoke run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "raw")
    args = parser.parse_args(argv)
    if args.tiny:
        args.workers, args.slots, args.jobs = 4, 2, 2000
    if args.step_jobs is None:
        args.step_jobs = max(500, args.jobs // 10)
    if args.pool_size > 20:
        parser.error("--pool-size: at most 20 (the pool the issue measures)")
    return args


def worker_main(argv: list[str]) -> int:
    """``python -m bench.fleet worker``: one jobs worker with its store calls timed."""
    from bench import wiring
    from bench.common import ExecRecorder, make_registry
    from bench.fleet_support import time_store_calls

    parser = argparse.ArgumentParser(prog="python -m bench.fleet worker")
    parser.add_argument("--slots", type=int, default=4)
    args = parser.parse_args(argv)
    time_store_calls()
    url = os.environ["JOBS_DATABASE_URL"]
    return wiring.run_worker(url, make_registry(ExecRecorder()), args.slots)


def main(argv: list[str] | None = None) -> int:
    """The benchmark, or (``worker``) one of its worker processes."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        return worker_main(argv[1:])
    args = parse(argv)
    results = run(args)
    json_path, md_path = write_report(results, args.out)
    log(f"results: {json_path} and {md_path}")
    print(json.dumps({"json": str(json_path), "md": str(md_path)}))
    failed = [
        f
        for f in results["fleets"]
        if f["exactly_once"]["duplicates"] or f["exactly_once"]["missing"]
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
