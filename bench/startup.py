"""Start-up times (issue 22): how long a worker takes to run its first job, and how long the
read commands of the CLI take to answer.

    uv run python -m bench.startup                  # 10 runs of each, medians and min-max
    uv run python -m bench.startup --runs 20 --only worker

Against the PostgreSQL server of ``--pg-url``, in a fresh database ``--db`` (migrated once):

- **worker**: one job queued, then a real worker process spawned; the clock runs from the spawn
  to the start of that job's handler (the figure the peer harness calls ``startup_s``). Two
  ways to spawn it: ``jobs worker`` (the console script, ``--extra-registry
  bench.startup:registry``) and ``python -m bench.run worker`` (how bench.run's drains start
  theirs). The worker is stopped with SIGTERM after each run.
- **cli**: ``jobs --help``, ``jobs ls``, ``jobs show ID`` (of an ended job: the reads alone; of a
  queued one: the registry is built too, why it waits depends on its type) and ``jobs workers``
  run as subprocesses, with ``--jobs`` jobs in the table (default 300); the clock runs from the
  spawn to the exit.

The virtualenv and the sources are byte-compiled first (``bench.common.compile_bytecode``), as a
deployment would be. Nothing is asserted: the figures are printed (a table on stdout) and
written to ``bench/results/raw/startup-<stamp>.json`` (git-ignored).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import wiring
from bench.common import (
    EXEC_FILE_ENV,
    NOOP,
    ORG,
    ExecRecorder,
    RecordTail,
    compile_bytecode,
    drop_database,
    make_registry,
    recreate_database,
    rounded,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summary: bench/results/*.md
BIN = Path(sys.executable).parent

registry = make_registry(ExecRecorder())
"""What the worker spawned by ``jobs worker`` runs (``--extra-registry bench.startup:registry``)."""

WORKER_COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "jobs worker": lambda url: [
        str(BIN / "jobs"),
        "worker",
        "--extra-registry",
        "bench.startup:registry",
        "--no-demo-types",
    ],
    "bench.run worker": lambda url: [
        sys.executable,
        "-m",
        "bench.run",
        "worker",
        "--database-url",
        url,
    ],
}


def _env(url: str, exec_file: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["JOBS_DATABASE_URL"] = url
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("JOBS_DEMO_TYPES", None)
    if exec_file is not None:
        env[EXEC_FILE_ENV] = str(exec_file)
    return env


def worker_start(url: str, how: str, workdir: Path, timeout_s: float = 30.0) -> float:
    """Queue one job, spawn a worker, the seconds from its spawn to the job's start."""
    with wiring.service(url, registry) as service:
        service.enqueue(ORG, NOOP, {"k": "first"})
    exec_file = workdir / "startup.exec"
    exec_file.unlink(missing_ok=True)
    tail = RecordTail(str(exec_file))
    log = open(workdir / "worker.log", "wb")  # noqa: SIM115 - closed below
    spawned = time.time()
    proc = subprocess.Popen(
        WORKER_COMMANDS[how](url),
        cwd=ROOT,
        env=_env(url, exec_file),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        while tail.poll() < 1:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{how}: the worker exited ({proc.returncode}): "
                    + (workdir / "worker.log").read_text(errors="replace")[-2000:]
                )
            if time.time() - spawned > timeout_s:
                raise RuntimeError(f"{how}: no job started within {timeout_s} s")
            time.sleep(0.002)
        started = float(exec_file.read_text().split()[1])
        return started - spawned
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def cli_time(url: str, argv: list[str]) -> float:
    """The seconds ``jobs <argv>`` takes, from its spawn to its exit (which must be 0)."""
    began = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "jobs"), *argv], cwd=ROOT, env=_env(url), capture_output=True, check=False
    )
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"jobs {' '.join(argv)} exited {done.returncode}: {done.stderr!r}")
    return elapsed


def summary(values: list[float]) -> dict[str, Any]:
    """Median, min and max of ``values`` in seconds (3 digits), and the runs."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return {
        "median_s": rounded(median, 3),
        "min_s": rounded(ordered[0], 3),
        "max_s": rounded(ordered[-1], 3),
        "runs": len(values),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="runs of each figure (default 10)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(
            "JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="the server (JOBS_BENCH_PG_URL; default postgresql://postgres@127.0.0.1:5432/postgres)",
    )
    parser.add_argument("--db", default="jobs_bench_startup", help="the database (dropped after)")
    parser.add_argument("--only", choices=["worker", "cli"], help="only these figures")
    parser.add_argument(
        "--jobs", type=int, default=300, help="jobs in the table for the CLI's reads (default 300)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    compile_bytecode(ROOT)
    url = recreate_database(args.pg_url, args.db)
    figures: dict[str, dict[str, Any]] = {}
    try:
        wiring.migrate(url)
        with tempfile.TemporaryDirectory(prefix="jobs-startup-") as tmp:
            if args.only in (None, "worker"):
                for how in WORKER_COMMANDS:
                    runs = [worker_start(url, how, Path(tmp)) for _ in range(args.runs)]
                    figures[f"{how}: spawn -> first job"] = summary(runs)
            if args.only in (None, "cli"):
                with wiring.service(url, registry) as service:
                    queued = [
                        service.enqueue(ORG, NOOP, {"k": f"listed-{n}"}).job.id
                        for n in range(max(args.jobs, 2))
                    ]
                    ended = service.cancel(ORG, queued[0]).id
                commands = {
                    "jobs --help": ["--help"],
                    "jobs ls": ["ls"],
                    "jobs show (ended job)": ["show", str(ended)],
                    "jobs show (queued job)": ["show", str(queued[-1])],
                    "jobs workers": ["workers"],
                }
                for name, command in commands.items():
                    runs = [cli_time(url, command) for _ in range(args.runs)]
                    figures[name] = summary(runs)
    finally:
        drop_database(args.pg_url, args.db)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"startup-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    width = max(len(name) for name in figures)
    print(f"{'':{width}}  median    min    max  (s, {args.runs} runs)")
    for name, figure in figures.items():
        print(
            f"{name:{width}}  {figure['median_s']:6.3f} {figure['min_s']:6.3f} "
            f"{figure['max_s']:6.3f}"
        )
    print(f"results: {out.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
