"""The hostile-tenant flood (issue 23): one org tries to flood the shared queue, another org's
jobs are timed while it does. A chaos-style scenario (docs/chaos.md, "The hostile tenant"):
real API and worker processes on a database of their own, the tenants over HTTP only.

    uv run python -m bench.flood                      # quotas on (the defaults), 1,000 schedules
    uv run python -m bench.flood --quotas off         # the same flood, no quotas
    uv run python -m bench.flood --small --max-queued 50 --job-ms 500 --slots 2 ...  # CI's

The hostile org, with one token: tries ``--schedules`` schedules of ``* * * * * *`` (every
second), then as many of ``* * * * *`` (every minute) as it is allowed, and for
``--duration-s`` seconds enqueues ``flood.work`` jobs over ``POST /jobs`` as fast as
``--flooders`` clients can, retrying after ``Retry-After`` when refused. The victim org
enqueues one job every ``--probe-every-s`` seconds and waits for it to start.

Measured: the statuses the hostile org got (and the quota each 429 named), its queued jobs
(sampled), and for each probe of the victim its wait (``started_at - created_at``, the
database's instants) and how many jobs started between its enqueue and its start (``ahead``:
a count, not a time). A probe still waiting at the end is reported as such with its wait so
far. Results: ``bench/results/raw/flood-<quotas>-<stamp>.{json,md}`` and one JSON line on
stdout. Nothing is asserted here (``tests/chaos/test_flood.py`` asserts the bounds).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from jobs_core import JobContext, JobType, Registry

from bench.common import drop_database, recreate_database

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
HOSTILE, VICTIM = "hostile", "victim"
WORK = "flood.work"


def _work(ctx: JobContext) -> None:
    time.sleep(float(ctx.payload.get("ms", 50)) / 1000)


registry = Registry("bench-flood")
"""Served by the API (``--registry``) and the worker (``JOBS_EXTRA_REGISTRIES``)."""
registry.register(JobType(WORK, _work, public=True, description="sleeps payload.ms"))


def _log(*parts: object) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}]", *parts, file=sys.stderr, flush=True)


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _api_url(log: Path, process: subprocess.Popen[bytes], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"Uvicorn running on (http://\S+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit(f"the API did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Flood:
    """One run: the processes, the two tenants and what they saw."""

    def __init__(self, args: argparse.Namespace, url: str, tokens: dict[str, str]) -> None:
        self.args = args
        self.url = url
        self.tokens = tokens
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.schedules: Counter[str] = Counter()
        self.enqueues: Counter[str] = Counter()
        self.retry_after: Counter[str] = Counter()
        self.queued_samples: list[int] = []
        self.probes: list[dict[str, Any]] = []

    def client(self, org: str, base: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[org]}"}
        return httpx.Client(base_url=base, headers=headers, timeout=30)

    def make_schedules(self, base: str) -> None:
        with self.client(HOSTILE, base) as http:
            for cron, tag in (("* * * * * *", "per-second"), ("* * * * *", "per-minute")):
                for i in range(self.args.schedules):
                    body = {"name": f"{tag}-{i}", "type": WORK, "cron": cron, "payload": self._ms()}
                    answer = http.post("/schedules", json=body)
                    quota = answer.json().get("quota") if answer.status_code >= 400 else None
                    self.schedules[f"{tag} {answer.status_code} {quota or ''}".strip()] += 1
                    if answer.status_code == 409 and quota == "schedules":
                        break  # the org holds its quota of schedules

    def _ms(self) -> dict[str, Any]:
        return {"ms": self.args.job_ms}

    def flooder(self, base: str) -> None:
        with self.client(HOSTILE, base) as http:
            while not self.stop.is_set():
                answer = http.post("/jobs", json={"type": WORK, "payload": self._ms()})
                with self.lock:
                    key = str(answer.status_code)
                    if answer.status_code == 429:
                        key += " " + str(answer.json().get("quota"))
                        self.retry_after[answer.headers.get("Retry-After", "none")] += 1
                    self.enqueues[key] += 1
                if answer.status_code == 429:
                    self.stop.wait(float(answer.headers.get("Retry-After", "1")))

    def sampler(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(0.5):
                row = conn.execute(
                    "SELECT count(*) FROM jobs WHERE org_id = %s AND status = 'queued'", (HOSTILE,)
                ).fetchone()
                self.queued_samples.append(int(row[0]) if row else 0)

    def prober(self, base: str) -> None:
        with self.client(VICTIM, base) as http:
            while not self.stop.is_set():
                answer = http.post("/jobs", json={"type": WORK, "payload": {"ms": 1}})
                self.probes.append({"id": answer.json()["id"], "status": answer.status_code})
                self.stop.wait(self.args.probe_every_s)

    def settle_probes(self, base: str) -> None:
        """Wait (``--probe-wait-s`` at most) for every probe to start, then read each one's
        wait and the jobs that started while it waited."""
        deadline = time.monotonic() + self.args.probe_wait_s
        with psycopg.connect(self.url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) FROM jobs WHERE org_id = %s AND started_at IS NULL",
                    (VICTIM,),
                ).fetchone()
                if row is None or row[0] == 0:
                    break
                time.sleep(0.5)
            for probe in self.probes:
                row = conn.execute(
                    """SELECT created_at, started_at,
                        extract(epoch FROM coalesce(started_at, clock_timestamp()) - created_at),
                        (SELECT count(*) FROM jobs o WHERE o.started_at > p.created_at
                            AND o.started_at < coalesce(p.started_at, clock_timestamp()))
                    FROM jobs p WHERE id = %s""",
                    (probe["id"],),
                ).fetchone()
                assert row is not None
                probe.update(started=row[1] is not None, wait_s=float(row[2]), ahead=int(row[3]))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One flood, start to end; the figures."""
    name = f"jobs_flood_{secrets.token_hex(4)}"
    url = recreate_database(args.pg_url, name)
    tmp = Path(args.out) / f"flood-{name}"
    tmp.mkdir(parents=True, exist_ok=True)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        from jobs_postgres import migrations
        from jobs_postgres.database import create_engine
        from jobs_postgres.tokens import PostgresTokenStore
        from jobs_tokens import issue_token

        migrations.upgrade(url)
        engine = create_engine(url)
        tokens = {
            org: issue_token(PostgresTokenStore(engine), org, "flood", datetime.now(UTC))[0]
            for org in (HOSTILE, VICTIM)
        }
        engine.dispose()
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
        env.update(
            PYTHONPATH=str(ROOT),
            JOBS_DATABASE_URL=url,
            JOBS_QUOTAS="1" if args.quotas == "on" else "0",
            JOBS_EXTRA_REGISTRIES="bench.flood:registry",
            JOBS_SCHEDULER_INTERVAL_S="1",
        )
        if args.max_queued is not None:
            env["JOBS_QUOTA_MAX_QUEUED"] = str(args.max_queued)
        if args.fifo:
            env["JOBS_FAIR_CLAIM"] = "0"
        if args.enqueue_rate is not None:
            env["JOBS_QUOTA_ENQUEUE_RATE"] = str(args.enqueue_rate)
        api_log, worker_log = tmp / "api.log", tmp / "worker.log"
        api = _start(
            [sys.executable, "-m", "jobs_api", "--port", "0", "--registry=bench.flood:registry"],
            env,
            api_log,
        )
        processes.append(api)
        base = _api_url(api_log, api)
        worker = [sys.executable, "-m", "jobs_worker", "--concurrency", str(args.slots)]
        processes.append(_start(worker, env, worker_log))
        flood = Flood(args, url, tokens)
        _log(f"quotas {args.quotas}: creating schedules")
        started = time.monotonic()
        flood.make_schedules(base)
        created_s = time.monotonic() - started
        _log(f"schedules {dict(flood.schedules)} in {created_s:.1f} s; flooding")
        threads = [
            threading.Thread(target=flood.sampler),
            threading.Thread(target=flood.prober, args=(base,)),
        ]
        threads += [
            threading.Thread(target=flood.flooder, args=(base,)) for _ in range(args.flooders)
        ]
        for thread in threads:
            thread.start()
        time.sleep(args.duration_s)
        flood.stop.set()
        for thread in threads:
            thread.join()
        _log("flood over; waiting for the probes")
        flood.settle_probes(base)
        waits = [p["wait_s"] for p in flood.probes]
        figures = {
            "quotas": args.quotas,
            "settings": {k: v for k, v in vars(args).items() if k not in ("pg_url", "out")},
            "schedules": dict(flood.schedules),
            "schedule_seconds": round(created_s, 1),
            "hostile_enqueues": dict(flood.enqueues),
            "retry_after": dict(flood.retry_after),
            "hostile_queued_max": max(flood.queued_samples, default=0),
            "probes": len(flood.probes),
            "probes_started": sum(p["started"] for p in flood.probes),
            "victim_wait_p50_s": round(statistics.median(waits), 2) if waits else None,
            "victim_wait_max_s": round(max(waits), 2) if waits else None,
            "ahead_max": max((p["ahead"] for p in flood.probes), default=0),
            "probe_details": flood.probes,
        }
    finally:
        for process in reversed(processes):
            _stop(process)
        drop_database(args.pg_url, name)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = tmp.parent / f"flood-{args.quotas}-{stamp}"
    path.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")
    path.with_suffix(".md").write_text(_markdown(figures))
    _log("wrote", path.with_suffix(".md"))
    return figures


def _markdown(f: dict[str, Any]) -> str:
    lines = [
        f"# Hostile-tenant flood, quotas {f['quotas']}",
        "",
        f"Settings: `{json.dumps(f['settings'])}`",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| hostile's schedule requests | {f['schedules']} ({f['schedule_seconds']} s) |",
        f"| hostile's enqueues | {f['hostile_enqueues']} (Retry-After: {f['retry_after']}) |",
        f"| hostile's queued jobs, max sampled | {f['hostile_queued_max']:,} |",
        f"| victim's probes started / sent | {f['probes_started']} / {f['probes']} |",
        f"| victim's wait p50 / max | {f['victim_wait_p50_s']} / {f['victim_wait_max_s']} s |",
        f"| jobs started ahead of a probe, max | {f['ahead_max']:,} |",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run one flood, print its figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.flood", description=__doc__)
    parser.add_argument("--quotas", choices=["on", "off"], default="on")
    parser.add_argument("--pg-url", default=os.environ.get("JOBS_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--schedules", type=int, default=1000, help="of each kind tried")
    parser.add_argument("--duration-s", type=float, default=60.0, help="of the enqueue flood")
    parser.add_argument("--flooders", type=int, default=4, help="hostile HTTP clients")
    parser.add_argument("--slots", type=int, default=4, help="the worker's concurrency")
    parser.add_argument("--job-ms", type=float, default=50.0, help="each hostile job's run time")
    parser.add_argument("--probe-every-s", type=float, default=1.0)
    parser.add_argument("--probe-wait-s", type=float, default=60.0, help="after the flood")
    parser.add_argument("--max-queued", type=int, help="JOBS_QUOTA_MAX_QUEUED (default: its)")
    parser.add_argument("--enqueue-rate", type=float, help="JOBS_QUOTA_ENQUEUE_RATE")
    parser.add_argument("--fifo", action="store_true", help="JOBS_FAIR_CLAIM=0: the plain claim")
    parser.add_argument("--small", action="store_true", help="at most 100 schedules of each kind")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.small:
        args.schedules = min(args.schedules, 100)
    figures = run(args)
    print(json.dumps({k: v for k, v in figures.items() if k != "probe_details"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
