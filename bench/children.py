"""The subprocess-handler benchmark: what a child process per job costs.

    uv run python -m bench.children         # ~1 min; bench/results/raw/children-<stamp>.{json,md}
    uv run python -m bench.children --n 50  # fewer jobs per phase (quicker, noisier)

Phases, all in one run so the figures compare (ratios, not absolutes: the box is shared):

- **drain rates** of N no-op jobs by the real :class:`~jobs_worker.worker.Worker` over the
  in-memory store (so the figures are the child's cost, not PostgreSQL's), at concurrency 1
  and 4, for: an in-process no-op handler (the baseline), a shell child (``/bin/sh`` script),
  a Python child (a ``run.py`` run by the worker's interpreter: seed-style cold start), and an
  isolated Python handler (``python -m jobs_worker.isolated``, which imports the worker's
  registries before it runs the handler: what ``import_csv`` pays);
- the **overhead per job** of each child kind against the in-process no-op at concurrency 1:
  ``1/rate(child) - 1/rate(in-process)``;
- the **RSS** of a real ``python -m jobs_worker`` process (on PostgreSQL, ``--pg-url``) idle,
  then with 8 children running (concurrency 8, 8 sleeping shell jobs), and the children's own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobs_core import (
    InMemoryJobStore,
    InMemoryWakeup,
    JobService,
    Registry,
    Status,
    SystemClock,
)
from jobs_worker.isolation import ChildRegistries, isolate
from jobs_worker.manifests import load_manifests
from jobs_worker.registries import compose
from jobs_worker.worker import Worker, WorkerConfig

from bench.children_types import registry

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
ORG = "bench"

HANDLERS = {
    "bench_sh_noop": (
        "command: ./run.sh\n",
        "run.sh",
        "#!/bin/sh\ncat > /dev/null\necho 'PROGRESS:1 done' >&2\necho '{}'\n",
    ),
    "bench_py_noop": (
        "",
        "run.py",
        "import json, sys\njson.loads(sys.stdin.readline())\n"
        "print('PROGRESS:1 done', file=sys.stderr)\nprint('{}')\n",
    ),
    "bench_sh_sleep": ("command: ./run.sh\n", "run.sh", "#!/bin/sh\ncat > /dev/null\nsleep 30\n"),
}


def write_handlers(directory: Path) -> Path:
    for type_id, (manifest, script, body) in HANDLERS.items():
        folder = directory / type_id
        folder.mkdir(parents=True)
        (folder / "manifest.yaml").write_text(f"id: {type_id}\n{manifest}")
        path = folder / script
        path.write_text(body)
        path.chmod(0o755)
    return directory


def drain(types: Registry, type_name: str, n: int, concurrency: int) -> dict[str, Any]:
    """N jobs enqueued first, then one worker drains them; jobs/s from its start to the last
    finish."""
    store = InMemoryJobStore()
    service = JobService(store, types, SystemClock())
    ids = [job.job.id for job in (service.enqueue(ORG, type_name, {}) for _ in range(n))]
    config = WorkerConfig(
        concurrency=concurrency, poll_interval_s=0.05, cancel_check_s=0.5, heartbeat_s=30
    )
    worker = Worker(service, InMemoryWakeup(store), config)

    started = time.perf_counter()
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = started + 600
    while True:
        done = sum(1 for job_id in ids if _status(store, job_id).is_finished)
        if done == n or time.perf_counter() > deadline:
            break
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    worker.stop()
    thread.join(30)
    statuses = [_status(store, job_id) for job_id in ids]
    failed = sum(1 for status in statuses if status is not Status.DONE)
    return {
        "type": type_name,
        "concurrency": concurrency,
        "n": n,
        "elapsed_s": round(elapsed, 3),
        "jobs_per_s": round(n / elapsed, 1),
        "ms_per_job": round(elapsed * 1000 / n, 2),
        "not_done": failed,
    }


def _status(store: InMemoryJobStore, job_id: uuid.UUID) -> Status:
    job = store.get(ORG, job_id)
    assert job is not None
    return job.status


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                todo.append(child)
    return found


def worker_rss(pg_url: str, handlers: Path, children: int) -> dict[str, Any]:
    """A real worker process on PostgreSQL: RSS idle, then with ``children`` sleeping
    children; the children's RSS (each shell child and its ``sleep``)."""
    from jobs_postgres import migrations
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    from bench.common import drop_database, recreate_database

    url = recreate_database(pg_url, "jobs_bench_children")
    migrations.upgrade(url)
    engine = create_engine(url)
    types = load_manifests(handlers).registry
    service = JobService(PostgresJobStore(engine), types, SystemClock())
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        JOBS_DATABASE_URL=url,
        JOBS_HANDLERS_DIR=str(handlers),
        JOBS_CONCURRENCY=str(children),
        JOBS_SHUTDOWN_GRACE_S="0",
        JOBS_LOG_LEVEL="WARNING",
    )
    worker = subprocess.Popen([sys.executable, "-m", "jobs_worker"], env=env, cwd=ROOT)
    try:
        # warm up: the worker has started, connected and run one child (and its reaper)
        warm = service.enqueue(ORG, "bench_sh_noop", {}).job
        deadline = time.monotonic() + 120
        while service.get(ORG, warm.id).status is not Status.DONE:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError("the worker did not run its first job")
            time.sleep(0.1)
        time.sleep(1)
        idle = rss_kib(worker.pid)
        for _ in range(children):
            service.enqueue(ORG, "bench_sh_sleep", {})
        deadline = time.monotonic() + 60
        kids: list[int] = []
        while time.monotonic() < deadline:
            kids = [pid for pid in descendants(worker.pid) if "sleep" in _comm(pid)]
            if len(kids) >= children:
                break
            time.sleep(0.1)
        time.sleep(1)
        busy = rss_kib(worker.pid)
        everyone = descendants(worker.pid)
        child_rss = [rss_kib(pid) or 0 for pid in everyone]
        reaper = [pid for pid in everyone if "python" in _comm(pid)]
        return {
            "children_running": len(kids),
            "worker_rss_idle_kib": idle,
            "worker_rss_busy_kib": busy,
            "descendant_processes": len(everyone),
            "descendants_rss_total_kib": sum(child_rss),
            "reaper_rss_kib": sum(rss_kib(pid) or 0 for pid in reaper),
        }
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        engine.dispose()
        drop_database(pg_url, "jobs_bench_children")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"# Subprocess handlers: {doc['stamp']}",
        "",
        f"`{doc['command']}` on {doc['machine']} (load average at start {doc['load_avg']}). "
        "Shared box: read the ratios, not the absolutes.",
        "",
        "| handler | concurrency | jobs/s | ms/job | overhead vs in-process, ms/job | not done |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in doc["drains"]:
        overhead = row.get("overhead_ms")
        lines.append(
            f"| {row['label']} | {row['concurrency']} | {row['jobs_per_s']:,} | "
            f"{row['ms_per_job']} | {'' if overhead is None else overhead} | {row['not_done']} |"
        )
    rss = doc.get("rss")
    if rss:
        lines += [
            "",
            f"Worker RSS (`python -m jobs_worker`, PostgreSQL): after its first child job "
            f"{rss['worker_rss_idle_kib']:,} KiB; with {rss['children_running']} children running "
            f"{rss['worker_rss_busy_kib']:,} KiB; its {rss['descendant_processes']} descendant "
            f"processes (shell children, their `sleep`, the reaper) "
            f"{rss['descendants_rss_total_kib']:,} KiB in all "
            f"(the reaper {rss['reaper_rss_kib']:,} KiB).",
        ]
    elif doc.get("rss_skipped"):
        lines += ["", f"Worker RSS: skipped ({doc['rss_skipped']})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.children",
        description=(
            "Measure subprocess handlers; write bench/results/raw/children-<stamp>.{json,md}."
        ),
    )
    parser.add_argument("--n", type=int, default=200, help="jobs per drain (default 200)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(
            "JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a server whose user may create databases, for the RSS phase ('' to skip it)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    doc: dict[str, Any] = {
        "stamp": stamp,
        "command": "python -m bench.children " + " ".join(argv or sys.argv[1:]),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "load_avg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "drains": [],
    }
    from bench.common import compile_bytecode

    compile_bytecode(ROOT)  # as a deployment has it: no child compiles its imports from source
    with tempfile.TemporaryDirectory(prefix="jobs-bench-children-") as tmp:
        handlers = write_handlers(Path(tmp) / "handlers")
        manifest_types = load_manifests(handlers).registry
        isolated = isolate(
            compose([registry]),
            ["bench_inproc_noop"],
            ChildRegistries(
                demo_types=False,
                extra_registries=("bench.children_types:registry",),
                handlers_dir=None,
                database_url=None,
                data_dir=tmp,
                shipped_modules=False,
            ),
            environ={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        phases: list[tuple[str, Registry, str]] = [
            ("in-process no-op", compose([registry]), "bench_inproc_noop"),
            ("shell child", manifest_types, "bench_sh_noop"),
            ("Python child (run.py)", manifest_types, "bench_py_noop"),
            ("isolated Python handler", isolated, "bench_inproc_noop"),
        ]
        baseline: dict[int, float] = {}
        for concurrency in (1, 4):
            for label, types, type_name in phases:
                n = args.n * (10 if label.startswith("in-process") else 1)
                row = drain(types, type_name, n, concurrency)
                row["label"] = label
                if label.startswith("in-process"):
                    baseline[concurrency] = row["ms_per_job"]
                else:
                    row["overhead_ms"] = round(row["ms_per_job"] - baseline[concurrency], 2)
                print(json.dumps(row), file=sys.stderr, flush=True)
                doc["drains"].append(row)
        if args.pg_url:
            try:
                doc["rss"] = worker_rss(args.pg_url, handlers, 8)
            except Exception as error:  # no server: say so in the results
                doc["rss_skipped"] = f"{type(error).__name__}: {error}"
        else:
            doc["rss_skipped"] = "--pg-url ''"
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"children-{stamp}.json"
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    (args.out / f"children-{stamp}.md").write_text(render(doc))
    print(render(doc))
    print(f"results: {json_path} (+ .md)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
