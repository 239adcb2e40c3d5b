"""The jobs benchmark: one command, one results file.

    uv run python -m bench.run                      # N = 10,000, 1,000,000 history rows, 1 round
    uv run python -m bench.run --n 2000 --history 100000 --rounds 3
    uv run python -m bench.run --tiny               # seconds: proves the benchmark works (CI)

It measures, against the PostgreSQL server of ``--pg-url`` (a database ``--db`` is dropped and
created again for every phase):

- **enqueue 1-by-1**: N ``JobService.enqueue`` calls, each its own transaction; jobs/s;
- **enqueue bulk**: one ``JobService.enqueue_many`` call with N jobs; jobs/s;
- **drain** (``default`` = concurrency 1, ``c10`` = 10): N queued no-op jobs, then ONE worker
  process is started; the clock runs from its spawn until every job ran and the table reports
  none queued or running; then the exactly-once check (duplicates, missing, unexpected);
- **history**: the same drain with ``--history`` finished rows already in ``jobs``, as a ratio to
  the empty-table drain of the same round (the partial queue index keeps the claim flat);
- **latency**: an idle worker, then jobs enqueued one at a time every ``--lat-gap-ms``; enqueue
  call → handler start, p50/p95/p99/max;
- **api**: one ``python -m jobs_api`` (uvicorn) process; ``GET /jobs/{id}`` throughput with
  ``--api-connections`` back-to-back clients, then p50/p99 under ``--api-pollers`` pollers.

Results: ``bench/results/raw/<stamp>.json`` (every figure of every round), ``<stamp>.md`` (medians)
and ``latest.md``. It never asserts a time: a failed exactly-once check or a worker that dies is
reported (exit code 1), a slow figure is only a figure.

``python -m bench.run worker --concurrency C --database-url URL`` is how the drain and latency
phases start their worker process; you never need to call it by hand.

``JOBS_BENCH_ANALYZE=1``: each drain's database is analyzed after its fill, as autovacuum leaves
a live one (the default drain runs on tables never analyzed); for both sides of an A/B, set it
in the environment of ``bench.flow ab``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psycopg

from bench import httpload, nolog, wiring
from bench.common import (
    FAILED_SQL,
    NOOP,
    ORG,
    TOTAL_SQL,
    UNFINISHED_SQL,
    RecordTail,
    compile_bytecode,
    drop_database,
    exactly_once,
    latency_summary,
    make_registry,
    payloads,
    percentile,
    read_records,
    recreate_database,
    rounded,
    scalar,
)
from bench.report import render_markdown
from bench.run_options import (
    DRAIN_CONFIGS,
    ROOT,
    BenchFailure,
    Options,
    log,
    machine_facts,
    parse,
)
from bench.run_support import (
    free_port,
    insert_history,
    probe_api,
    ratios,
    summarize,
    wait_healthy,
)
from bench.run_worker import WorkerProcess, worker_main

ANALYZE_ENV = "JOBS_BENCH_ANALYZE"
"""Analyze each drain's database after its fill (``1``)."""

# ---- phases ------------------------------------------------------------------------------------


class Bench:
    """Runs the phases of one round against fresh databases."""

    def __init__(self, opts: Options) -> None:
        self.o = opts
        self.registry = make_registry(lambda key: None)
        self.errors: list[str] = []

    @contextmanager
    def fresh(self) -> Iterator[str]:
        """A freshly created, migrated database; its URL."""
        url = recreate_database(self.o.pg_url, self.o.db)
        wiring.migrate(url)
        if nolog.asked():
            nolog.disable_triggers(url)
        yield url

    def path(self, name: str) -> Path:
        """A file of this run in the work directory."""
        return self.o.workdir / f"{self.o.tag}-{name}"

    # -- enqueue -------------------------------------------------------------------------------
    def enqueue(self) -> dict[str, Any]:
        """1-by-1 then bulk, each into a fresh database."""
        n = self.o.n
        out: dict[str, Any] = {}
        with self.fresh() as url, wiring.service(url, self.registry) as service:
            began = time.perf_counter()
            for key in range(n):
                service.enqueue(ORG, NOOP, {"k": key})
            elapsed = time.perf_counter() - began
            stored = scalar(url, TOTAL_SQL)
        out["enqueue_single"] = {"jps": rounded(n / elapsed), "s": rounded(elapsed, 3)}
        self.check_stored("enqueue_single", stored, n)
        with self.fresh() as url, wiring.service(url, self.registry) as service:
            docs = payloads(range(n))
            began = time.perf_counter()
            service.enqueue_many(ORG, NOOP, docs)
            elapsed = time.perf_counter() - began
            stored = scalar(url, TOTAL_SQL)
        out["enqueue_bulk"] = {"jps": rounded(n / elapsed), "s": rounded(elapsed, 3)}
        self.check_stored("enqueue_bulk", stored, n)
        return out

    def check_stored(self, phase: str, stored: int, expected: int) -> None:
        """Record an error if an enqueue phase did not store every job."""
        if stored != expected:
            self.errors.append(f"{phase}: {stored} jobs stored, {expected} enqueued")

    # -- drain ---------------------------------------------------------------------------------
    def fill(self, url: str, n: int) -> None:
        """``n`` queued no-op jobs (untimed), keys 0..n-1."""
        with wiring.service(url, self.registry) as service:
            for start in range(0, n, 50_000):
                service.enqueue_many(ORG, NOOP, payloads(range(start, min(n, start + 50_000))))

    def drain(self, cfg: str, history: int = 0) -> dict[str, Any]:
        """Fill a fresh database (a copy of the history template with ``history``), drain it."""
        extra: dict[str, Any] = {}
        if history:
            url = recreate_database(self.o.pg_url, self.o.db, template=self.history_template())
            extra = {"history_rows": history, "history_insert_s": self.history_insert_s}
        else:
            url = recreate_database(self.o.pg_url, self.o.db)
            wiring.migrate(url)
        if nolog.asked():
            nolog.disable_triggers(url)
        self.fill(url, self.o.n)
        if os.environ.get(ANALYZE_ENV, "").strip() == "1":
            # as autovacuum leaves a live database: statistics of the filled queue and of an
            # empty history (bench/NOTES.md §12); the worker's plans are made from them
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
        return {**self.timed_drain(url, cfg, f"drain-{cfg}-h{history}"), **extra}

    history_insert_s: float | None = None
    _template: str | None = None

    def history_template(self) -> str:
        """A migrated database holding ``--history`` finished rows, built once per run and
        copied for each history drain (a template copy takes seconds, the insert much longer)."""
        if self._template is None:
            name = f"{self.o.db}_history"
            url = recreate_database(self.o.pg_url, name)
            wiring.migrate(url)
            began = time.perf_counter()
            insert_history(url, self.o.history)
            self.history_insert_s = rounded(time.perf_counter() - began, 2)
            log(f"{self.o.history:,} finished rows inserted in {self.history_insert_s} s")
            self._template = name
        return self._template

    def timed_drain(self, url: str, cfg: str, name: str) -> dict[str, Any]:
        """Spawn one worker and time it until the queue is empty; the exactly-once check."""
        n = self.o.n
        queued = scalar(url, UNFINISHED_SQL)
        exec_file = self.path(f"{name}.exec")
        exec_file.unlink(missing_ok=True)
        tail = RecordTail(str(exec_file))
        worker = WorkerProcess(url, DRAIN_CONFIGS[cfg], exec_file, self.path(f"{name}.log"))
        done_at: float | None = None
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                while True:
                    now = time.time()
                    if now - worker.spawned > self.o.drain_timeout_s:
                        self.errors.append(f"{name}: not drained after {self.o.drain_timeout_s} s")
                        break
                    if not worker.alive():
                        raise BenchFailure(f"{name}: worker exited\n{worker.tail_log()}")
                    if tail.poll() >= n:
                        row = conn.execute(UNFINISHED_SQL).fetchone()
                        if row is not None and row[0] == 0:
                            done_at = time.time()
                            break
                    time.sleep(0.005)
            time.sleep(self.o.settle_s)  # late duplicates would show up here
        finally:
            stopped = worker.stop()
        records = read_records(str(exec_file))
        check = exactly_once(records, {str(k) for k in range(n)})
        if check["duplicates"] or check["missing"] or check["unexpected"]:
            self.errors.append(f"{name}: {check}")
        if stopped["stop"] != "sigterm" or stopped["rc"] != 0:
            self.errors.append(f"{name}: worker stop {stopped}")
        result: dict[str, Any] = {
            "concurrency": DRAIN_CONFIGS[cfg],
            "queued_before": queued,
            **check,
            **stopped,
            "unfinished_after": scalar(url, UNFINISHED_SQL),
            "failed_after": scalar(url, FAILED_SQL),
        }
        if records:
            starts = [t for _, t in records]
            result["startup_s"] = rounded(min(starts) - worker.spawned, 3)
            if done_at is not None:
                wall = done_at - worker.spawned
                active = done_at - min(starts)
                result.update(
                    wall_s=rounded(wall, 3),
                    jps=rounded(n / wall),
                    active_jps=rounded(n / active) if active > 0 else None,
                    ack_lag_s=rounded(done_at - max(starts), 3),
                )
        if not self.keep_files:
            exec_file.unlink(missing_ok=True)
        return result

    keep_files = False

    # -- latency -------------------------------------------------------------------------------
    def latency(self) -> dict[str, Any]:
        """Enqueue → start of an idle default worker, one job every ``lat_gap_ms``."""
        lat_n, gap = self.o.lat_n, self.o.lat_gap_ms / 1000
        with self.fresh() as url, wiring.service(url, self.registry) as service:
            exec_file = self.path("latency.exec")
            exec_file.unlink(missing_ok=True)
            tail = RecordTail(str(exec_file))
            worker = WorkerProcess(url, 1, exec_file, self.path("latency.log"))
            calls: dict[str, tuple[float, float]] = {}
            warm = [f"w{i}" for i in range(5)]
            try:
                began = time.time()
                for key in warm:
                    service.enqueue(ORG, NOOP, {"k": key})
                while tail.poll() < len(warm):
                    if time.time() - began > 120 or not worker.alive():
                        raise BenchFailure(f"latency: warm-up jobs never ran\n{worker.tail_log()}")
                    time.sleep(0.01)
                time.sleep(self.o.idle_s)  # the worker is idle, waiting for a notification
                t0 = time.perf_counter()
                for i in range(lat_n):
                    delay = t0 + i * gap - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    called = time.time()
                    service.enqueue(ORG, NOOP, {"k": str(i)})
                    calls[str(i)] = (called, time.time())
                deadline = time.time() + 30
                while tail.poll() < len(warm) + lat_n and time.time() < deadline:
                    time.sleep(0.01)
                time.sleep(self.o.settle_s)
            finally:
                stopped = worker.stop()
        records = read_records(str(exec_file))
        check = exactly_once(records, set(calls) | set(warm))
        if check["duplicates"] or check["missing"] or check["unexpected"]:
            self.errors.append(f"latency: {check}")
        first: dict[str, float] = {}
        for key, started in records:
            if key in calls and key not in first:
                first[key] = started
        lat = [(first[k] - calls[k][0]) * 1000 for k in first]
        pickup = [(first[k] - calls[k][1]) * 1000 for k in first]
        call_ms = [(end - start) * 1000 for start, end in calls.values()]
        if not self.keep_files:
            exec_file.unlink(missing_ok=True)
        return {
            "n": lat_n,
            "gap_ms": self.o.lat_gap_ms,
            **latency_summary(lat),
            "pickup_p50_ms": rounded(percentile(pickup, 50), 2),
            "pickup_p99_ms": rounded(percentile(pickup, 99), 2),
            "enqueue_call_p50_ms": rounded(percentile(call_ms, 50), 2),
            **check,
            **stopped,
        }

    # -- api -----------------------------------------------------------------------------------
    def api(self) -> dict[str, Any]:
        """``GET /jobs/{id}`` against one uvicorn process of the API deployable."""
        o = self.o
        with self.fresh() as url:
            token = wiring.issue_token(url, ORG)
            with wiring.service(url, self.registry) as service:
                jobs = service.enqueue_many(ORG, NOOP, payloads(range(o.api_jobs)))
            paths = [f"/jobs/{job.id}" for job in jobs]
            port = free_port()
            log_file = self.path("api.log")
            env = dict(os.environ, JOBS_DATABASE_URL=url, JOBS_STORE="postgres")
            with open(log_file, "wb") as api_log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "jobs_api", "--host", "127.0.0.1", "--port", str(port)],
                    cwd=ROOT,
                    env=env,
                    stdout=api_log,
                    stderr=subprocess.STDOUT,
                )
                try:
                    wait_healthy(port, proc, log_file)
                    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
                    # One authenticated request first: a wrong token would make every figure a 401.
                    probe = asyncio.run(probe_api(port, headers, paths[0]))
                    if probe != 200:
                        raise BenchFailure(f"api: GET {paths[0]} answered {probe}")
                    thr = asyncio.run(
                        httpload.closed_loop(
                            "127.0.0.1",
                            port,
                            headers,
                            paths,
                            connections=o.api_connections,
                            duration_s=o.api_duration_s,
                        )
                    )
                    polled = asyncio.run(
                        httpload.pollers(
                            "127.0.0.1",
                            port,
                            headers,
                            paths,
                            count=o.api_pollers,
                            interval_s=o.api_poll_interval_s,
                            duration_s=o.api_duration_s,
                        )
                    )
                finally:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
        for name, res in (("throughput", thr), ("pollers", polled)):
            if res.errors:
                self.errors.append(f"api {name}: {res.errors} non-200 answers {res.statuses}")
        return {
            "throughput": {
                "connections": o.api_connections,
                "duration_s": o.api_duration_s,
                "rps": rounded(thr.rps),
                "requests": thr.requests,
                "errors": thr.errors,
                **latency_summary(thr.latencies_ms),
            },
            "pollers": {
                "pollers": o.api_pollers,
                "interval_s": o.api_poll_interval_s,
                "offered_rps": rounded(o.api_pollers / o.api_poll_interval_s),
                "rps": rounded(polled.rps),
                "requests": polled.requests,
                "errors": polled.errors,
                **latency_summary(polled.latencies_ms),
            },
        }

    # -- one round -----------------------------------------------------------------------------
    def round(self, number: int) -> dict[str, Any]:
        """Every selected phase once; the in-round ratios."""
        res: dict[str, Any] = {"round": number}
        phases = self.o.phases
        step: Callable[[str], None] = lambda what: log(f"round {number}: {what}")  # noqa: E731
        if "enqueue" in phases:
            step("enqueue 1-by-1 and bulk")
            res.update(self.enqueue())
        if "drain" in phases or "history" in phases:
            res["drain"] = {}
            for cfg in DRAIN_CONFIGS:
                step(f"drain {cfg}")
                res["drain"][cfg] = self.drain(cfg)
                if "history" in phases and self.o.history:
                    step(f"drain {cfg} with {self.o.history:,} finished rows in jobs")
                    res["drain"][f"{cfg}_history"] = self.drain(cfg, history=self.o.history)
        if "latency" in phases:
            step("latency")
            res["latency"] = self.latency()
        if "api" in phases:
            step("api")
            res["api"] = self.api()
        res["ratios"] = ratios(res)
        return res


def main(argv: list[str] | None = None) -> int:
    """Entry point: the benchmark, or (``worker ...``) one worker process."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        return worker_main(argv[1:])
    opts = parse(argv)
    log("byte-compiling the environment (once; a worker start must not compile from source)")
    compile_bytecode(ROOT)
    began = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        machine = machine_facts(opts.pg_url)
    except psycopg.OperationalError as error:
        print(f"bench: cannot reach PostgreSQL at {opts.pg_url}: {error}", file=sys.stderr)
        return 3
    bench = Bench(opts)
    rounds = []
    try:
        for number in range(1, opts.rounds + 1):
            rounds.append(bench.round(number))
    except BenchFailure as failure:
        bench.errors.append(str(failure))
        log(f"FAILED: {failure}")
    finally:
        drop_database(opts.pg_url, opts.db)
        drop_database(opts.pg_url, f"{opts.db}_history")
    doc = {
        "started": stamp,
        "elapsed_s": round(time.time() - began, 1),
        "machine": machine,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "rounds": rounds,
        "summary": summarize(rounds) if rounds else {},
        "errors": bench.errors,
    }
    opts.out.mkdir(parents=True, exist_ok=True)
    json_path = opts.out / f"{stamp}.json"
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    markdown = render_markdown(doc)
    (opts.out / f"{stamp}.md").write_text(markdown)
    (opts.out / "latest.md").write_text(markdown)
    print(markdown)
    log(f"results: {json_path} (+ .md, latest.md); {doc['elapsed_s']} s")
    if bench.errors:
        log("errors:\n  " + "\n  ".join(bench.errors))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
