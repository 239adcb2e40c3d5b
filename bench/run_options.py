"""What :mod:`bench.run` is told: its command line, its options, the machine it runs on, its log."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    server_facts,
)

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
