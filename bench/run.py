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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench import httpload, nolog, wiring
from bench.common import (
    EXEC_FILE_ENV,
    FAILED_SQL,
    NOOP,
    ORG,
    TOTAL_SQL,
    UNFINISHED_SQL,
    ExecRecorder,
    RecordTail,
    compile_bytecode,
    drop_database,
    exactly_once,
    latency_summary,
    make_registry,
    median,
    payloads,
    percentile,
    read_records,
    recreate_database,
    rounded,
    scalar,
    server_facts,
)
from bench.report import render_markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
PHASES = ("enqueue", "drain", "history", "latency", "api")
DRAIN_CONFIGS = {"default": 1, "c10": 10}
"""Worker configurations: ``default`` is the concurrency a worker has without options
(docs/contract.md §4: one job at a time); ``c10`` is ten slots."""


@dataclass
class Options:
    """Everything the command line sets."""

    pg_url: str
    db: str
    n: int
    history: int
    rounds: int
    phases: tuple[str, ...]
    lat_n: int
    lat_gap_ms: float
    idle_s: float
    settle_s: float
    drain_timeout_s: float
    api_jobs: int
    api_connections: int
    api_duration_s: float
    api_pollers: int
    api_poll_interval_s: float
    out: Path
    workdir: Path
    tag: str


class BenchFailure(RuntimeError):
    """A phase could not produce its figure (worker died, jobs lost, server unreachable)."""


def log(*parts: object) -> None:
    """Progress on stderr (stdout stays for the final summary)."""
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, file=sys.stderr, flush=True)


# ---- the worker process ------------------------------------------------------------------------


def worker_command(url: str, concurrency: int) -> list[str]:
    """The command line of one benchmark worker process."""
    return [
        sys.executable,
        "-m",
        "bench.run",
        "worker",
        "--database-url",
        url,
        "--concurrency",
        str(concurrency),
    ]


class WorkerProcess:
    """One real jobs worker (``jobs_worker``) in its own process, recording into ``exec_file``."""

    def __init__(self, url: str, concurrency: int, exec_file: Path, log_file: Path) -> None:
        env = dict(os.environ)
        env[EXEC_FILE_ENV] = str(exec_file)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.log_file = log_file
        self._log = open(log_file, "wb")  # noqa: SIM115 - closed in stop()
        self.spawned = time.time()
        self.proc = subprocess.Popen(
            worker_command(url, concurrency),
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def stop(self, grace_s: float = 30.0) -> dict[str, Any]:
        """SIGTERM, then wait for a graceful exit (SIGKILL after ``grace_s``)."""
        began = time.time()
        how = "exited-early"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
                how = "sigterm"
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                how = "sigkill"
        self._log.close()
        return {"stop": how, "stop_s": rounded(time.time() - began, 2), "rc": self.proc.returncode}

    def tail_log(self, lines: int = 15) -> str:
        """The end of the worker's log, for an error message."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def worker_main(argv: list[str]) -> int:
    """``python -m bench.run worker``: run one jobs worker until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m bench.run worker")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)
    if nolog.install_if_asked():
        log("this worker writes no event rows (JOBS_BENCH_NO_LOG=1, bench/nolog.py)")
    registry = make_registry(ExecRecorder())
    return wiring.run_worker(args.database_url, registry, args.concurrency)


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
                    probe = asyncio.run(_probe(port, headers, paths[0]))
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


def ratios(res: dict[str, Any]) -> dict[str, float | None]:
    """Ratios measured inside one round (far less noisy than ratios of medians)."""
    out: dict[str, float | None] = {}

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    single = (res.get("enqueue_single") or {}).get("jps")
    bulk = (res.get("enqueue_bulk") or {}).get("jps")
    out["bulk_over_single"] = ratio(bulk, single)
    drain = res.get("drain") or {}
    jps = {name: (d or {}).get("jps") for name, d in drain.items()}
    out["c10_over_default"] = ratio(jps.get("c10"), jps.get("default"))
    for cfg in DRAIN_CONFIGS:
        out[f"history_over_empty_{cfg}"] = ratio(jps.get(f"{cfg}_history"), jps.get(cfg))
    return out


def insert_history(url: str, rows: int) -> None:
    """``rows`` finished jobs of another org in one ``generate_series`` statement, then
    ``VACUUM ANALYZE``: the state of a table that has lived (autovacuum would have visited it).

    Mostly ``done``, one in 50 ``failed``; times spread over the past 30 days.
    """
    statement = """
        INSERT INTO jobs (id, org_id, type, status, attempts, max_attempts, dedup_scope, payload,
                          report, error, created_at, run_at, started_at, finished_at)
        SELECT uuidv7(), 'history', %(type)s,
               CASE WHEN i %% 50 = 0 THEN 'failed' ELSE 'done' END,
               1, 3, 'queue', jsonb_build_object('k', -i),
               NULL, CASE WHEN i %% 50 = 0 THEN 'RuntimeError: boom' END,
               t, t, t + interval '1 second', t + interval '2 seconds'
        FROM (
            SELECT i, now() - interval '30 days' + (i * interval '30 days' / %(rows)s) AS t
            FROM generate_series(1, %(rows)s) AS i
        ) AS h
    """
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, {"type": NOOP, "rows": rows})
        conn.execute("VACUUM ANALYZE jobs")


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(port: int, proc: subprocess.Popen[bytes], log_file: Path) -> None:
    """Wait until ``GET /healthz`` answers 200 (60 s at most)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise BenchFailure(f"api: server exited rc={proc.returncode}\n{log_file.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise BenchFailure("api: /healthz never answered 200 within 60 s")


async def _probe(port: int, headers: dict[str, str], path: str) -> int:
    conn = httpload.Connection("127.0.0.1", port, headers)
    try:
        return await conn.get(path)
    finally:
        await conn.close()


# ---- the machine ---------------------------------------------------------------------------------


def machine_facts(pg_url: str) -> dict[str, Any]:
    """What the figures depend on: CPU, memory, Python, PostgreSQL, the commit measured."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib: float | None = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        mem_gib = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        pass
    commit = None
    if shutil.which("git"):
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            check=False,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        commit = done.stdout.strip() or None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "postgres": dict(server_facts(pg_url)),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "commit": commit,
    }


# ---- command line --------------------------------------------------------------------------------


def parse(argv: list[str]) -> Options:
    """The command line → :class:`Options`."""
    p = argparse.ArgumentParser(
        prog="python -m bench.run",
        description="Run the jobs benchmark and write bench/results/raw/<stamp>.{json,md}.",
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get(
            "JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a PostgreSQL server URL whose user may create databases (env JOBS_BENCH_PG_URL)",
    )
    p.add_argument("--db", default="jobs_bench", help="database dropped and re-created per phase")
    p.add_argument("--n", type=int, default=10_000, help="jobs per enqueue and drain phase")
    p.add_argument("--history", type=int, default=1_000_000, help="finished rows (0: skip)")
    p.add_argument("--rounds", type=int, default=1, help="rounds; medians are reported")
    p.add_argument("--phases", default=",".join(PHASES), help=f"subset of {','.join(PHASES)}")
    p.add_argument("--lat-n", type=int, default=200, help="latency jobs")
    p.add_argument("--lat-gap-ms", type=float, default=20.0, help="spacing of latency jobs")
    p.add_argument("--idle-s", type=float, default=1.0, help="idle time before latency jobs")
    p.add_argument("--settle-s", type=float, default=1.0, help="wait for late duplicates")
    p.add_argument("--drain-timeout-s", type=float, default=600.0)
    p.add_argument("--api-jobs", type=int, default=1000, help="jobs the API reads")
    p.add_argument("--api-connections", type=int, default=16, help="throughput clients")
    p.add_argument("--api-duration-s", type=float, default=5.0, help="length of each API load")
    p.add_argument("--api-pollers", type=int, default=50, help="concurrent pollers")
    p.add_argument("--api-poll-interval-s", type=float, default=0.25, help="each poller's period")
    p.add_argument("--out", type=Path, default=RESULTS, help="where the results files go")
    p.add_argument("--workdir", type=Path, default=None, help="record files and logs")
    p.add_argument(
        "--tiny",
        action="store_true",
        help="a few seconds per phase (N 300, 2,000 history rows, 30 latency jobs): proves the "
        "benchmark runs, its figures mean nothing",
    )
    a = p.parse_args(argv)
    if a.tiny:
        a.n, a.history, a.lat_n, a.idle_s, a.settle_s = 300, 2000, 30, 0.3, 0.3
        a.api_jobs, a.api_duration_s, a.api_pollers = 50, 1.0, 10
    phases = tuple(x.strip() for x in a.phases.split(",") if x.strip())
    unknown = set(phases) - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s) {', '.join(sorted(unknown))}; choose among {', '.join(PHASES)}")
    if a.n < 1 or a.rounds < 1 or a.lat_n < 1 or a.history < 0:
        p.error("--n, --rounds and --lat-n must be >= 1, --history >= 0")
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="jobs-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return Options(
        pg_url=a.pg_url,
        db=a.db,
        n=a.n,
        history=a.history,
        rounds=a.rounds,
        phases=phases,
        lat_n=a.lat_n,
        lat_gap_ms=a.lat_gap_ms,
        idle_s=a.idle_s,
        settle_s=a.settle_s,
        drain_timeout_s=a.drain_timeout_s,
        api_jobs=a.api_jobs,
        api_connections=a.api_connections,
        api_duration_s=a.api_duration_s,
        api_pollers=a.api_pollers,
        api_poll_interval_s=a.api_poll_interval_s,
        out=a.out,
        workdir=workdir,
        tag=f"run{os.getpid()}",
    )


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds of every numeric figure, by the same key paths."""

    def walk(docs: list[Any]) -> Any:
        first = next((d for d in docs if d is not None), None)
        if isinstance(first, dict):
            keys: list[str] = []
            for d in docs:
                for k in d or {}:
                    if k not in keys:
                        keys.append(k)
            return {k: walk([(d or {}).get(k) for d in docs]) for k in keys}
        if isinstance(first, bool) or not isinstance(first, int | float):
            return first
        return median(docs)

    return dict(walk(rounds))


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
