"""Import a large search-analytics CSV through the real ``jobs api`` and ``jobs worker`` and
record the wall time and the worker's peak memory.

    uv run python bench/imports/measure.py                     # 1,000,000 rows
    uv run python bench/imports/measure.py --rows 20000        # a quick run

What it does, on a database of its own (created on ``--pg-url``'s server, dropped at the end):

1. writes the CSV with ``generate_csv.py`` (not timed; reused when ``--csv`` names an existing
   file);
2. ``jobs migrate``, ``jobs token create``, then starts ``jobs api`` and ``jobs worker`` as child
   processes, exactly as a deployment runs them (``python -m jobs_cli``, so the measured pid is
   the worker itself, not a ``uv`` wrapper);
3. creates a site target and loads its ``--pages`` pages over HTTP (so the import maps its rows
   as it inserts them, as it does when the crawler came first);
4. uploads the file (``POST /imports/csv``) and polls ``GET /imports/{id}`` until the import
   ends, sampling the worker's resident memory; then waits for the reconcile that maps the rows;
5. reads the worker's peak resident set (``VmHWM`` of ``/proc/<pid>/status``: the kernel's
   high-water mark, so no peak between two samples is missed) and stops both processes.
   ``import_csv`` runs in a child process of the worker (``JOBS_ISOLATED_TYPES``), so the
   worker's descendants are sampled too (their ``VmHWM`` at every poll, the last one read just
   before the child exits): the figure is the larger of the worker's and the child's peak.

Results: ``bench/results/raw/imports-<rows>.json`` (``imports-1m.json`` for a million rows) and
one Markdown line appended to ``bench/results/raw/imports.md``. Nothing is asserted: the 300 MB
target is reported as met or not; a failed import exits 1. The summary kept in the repository:
``bench/results/imports.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
TARGET_MB = 300
ORG = "bench"
DOMAIN = "www.example.com"


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[imports-bench] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def status_kb(pid: int, field: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def descendants(pid: int) -> list[int]:
    """The live descendants of ``pid`` (the child process an isolated import runs in)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                kids = [int(text) for text in task.read_text().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


class ChildPeaks:
    """The highest ``VmHWM`` seen of each descendant of the worker, sampled at every poll."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peaks: dict[int, int] = {}

    def sample(self) -> None:
        for child in descendants(self.pid):
            try:
                self.peaks[child] = max(self.peaks.get(child, 0), status_kb(child, "VmHWM"))
            except (OSError, KeyError):
                continue  # it just exited

    def peak_kb(self) -> int:
        return max(self.peaks.values(), default=0)


def cli(*args: str, env: dict[str, str]) -> str:
    """Run ``jobs ARGS`` to completion; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "jobs_cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"jobs {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate`` until truthy, bounded."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole measurement; the result document."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from jobs_postgres.database import drop_database, ensure_database, with_database

    from bench.imports.generate_csv import generate

    work = Path(tempfile.mkdtemp(prefix="jobs-imports-bench-"))
    csv_path = args.csv or work / f"gsc-{args.rows}.csv"
    if not csv_path.exists():
        log(f"writing {args.rows} rows to {csv_path}")
        generate(csv_path, args.rows, pages=args.pages, queries=50, seed=1, domain=DOMAIN)
    size = csv_path.stat().st_size

    name = f"jobs_imports_bench_{os.getpid()}_{secrets.token_hex(3)}"
    ensure_database(args.pg_url, name)
    url = with_database(args.pg_url, name)
    data_dir = work / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        {
            "JOBS_DATABASE_URL": url,
            "JOBS_DATA_DIR": str(data_dir),
            "JOBS_DEMO_TYPES": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        }
    )
    children: list[subprocess.Popen[bytes]] = []
    try:
        cli("migrate", env=env)
        token = cli("token", "create", "--org", ORG, env=env).strip().splitlines()[-1]
        port = free_port()
        api_log = (work / "api.log").open("wb")
        api = subprocess.Popen(
            [sys.executable, "-m", "jobs_cli", "api", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=api_log,
            stderr=subprocess.STDOUT,
        )
        children.append(api)
        worker_log_path = work / "worker.log"
        worker = subprocess.Popen(
            [sys.executable, "-m", "jobs_cli", "worker"],
            cwd=ROOT,
            env=env,
            stdout=worker_log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        children.append(worker)
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=600) as http:

            def api_up() -> bool:
                try:
                    return http.get("/healthz").status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(api_up, 60, "the API")
            wait_for(
                lambda: "worker.started" in worker_log_path.read_text(errors="replace"),
                60,
                "the worker",
            )
            idle_kb = status_kb(worker.pid, "VmRSS")
            return measure(
                http,
                worker=worker,
                api=api,
                size=size,
                csv_path=csv_path,
                args=args,
                idle_kb=idle_kb,
                work=work,
            )
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
        if not args.keep:
            drop_database(args.pg_url, name)
        log(f"logs and data in {work}")


def measure(
    http: httpx.Client,
    *,
    worker: subprocess.Popen[bytes],
    api: subprocess.Popen[bytes],
    size: int,
    csv_path: Path,
    args: argparse.Namespace,
    idle_kb: int,
    work: Path,
) -> dict[str, Any]:
    """Steps 3 to 5, with the processes up."""
    target = http.post("/site-targets", json={"name": "bench", "base_url": DOMAIN})
    target.raise_for_status()
    target_id = target.json()["id"]
    urls = [f"https://{DOMAIN}/blog/{i // 100}/article-{i}" for i in range(args.pages)]
    for start in range(0, len(urls), 5000):
        loaded = http.post(
            f"/site-targets/{target_id}/pages", json={"urls": urls[start : start + 5000]}
        )
        loaded.raise_for_status()

    log(f"uploading {csv_path} ({size / 1e6:.1f} MB)")
    started = time.monotonic()
    with csv_path.open("rb") as handle:
        response = http.post(
            "/imports/csv",
            data={"site_target_id": target_id},
            files={"file": ("gsc.csv", handle, "text/csv")},
        )
    response.raise_for_status()
    uploaded = time.monotonic()
    import_id = response.json()["id"]

    rss_samples: list[int] = []
    state: dict[str, Any] = {}
    child_peaks = ChildPeaks(worker.pid)

    def import_ended() -> bool:
        rss_samples.append(status_kb(worker.pid, "VmRSS"))
        child_peaks.sample()
        state["import"] = http.get(f"/imports/{import_id}").json()
        job = state["import"]["job"] or {}
        # the import is marked done by the handler's last transaction, its job a moment later
        return state["import"]["status"] in ("done", "failed") and bool(job.get("finished_at"))

    wait_for(import_ended, 3600, "the import")
    ended = time.monotonic()
    result = state["import"]
    log(f"import {result['status']}: {result['counts']} in {ended - started:.1f} s")

    def reconciled() -> bool:
        rss_samples.append(status_kb(worker.pid, "VmRSS"))
        child_peaks.sample()
        listing = http.get("/imports", params={"site_target_id": target_id}).json()
        state["events"] = listing["reconcile_events"]
        return bool(state["events"]) and all(
            event["status"] in ("done", "failed") for event in state["events"]
        )

    wait_for(reconciled, 3600, "the reconcile")
    peak_kb = status_kb(worker.pid, "VmHWM")
    api_peak_kb = status_kb(api.pid, "VmHWM")
    job = result["job"] or {}
    events = state["events"]
    last = events[0]

    def seconds(start: str | None, end: str | None) -> float | None:
        if not start or not end:
            return None
        elapsed = datetime.fromisoformat(end) - datetime.fromisoformat(start)
        return round(elapsed.total_seconds(), 2)

    import_s = seconds(job.get("started_at"), job.get("finished_at"))
    report = job.get("report") or {}
    return {
        "benchmark": "imports",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": args.rows,
        "file_mb": round(size / 1e6, 1),
        "pages": args.pages,
        "status": result["status"],
        "error": result["error"],
        "counts": result["counts"],
        "wall_s": round(ended - started, 2),
        "upload_s": round(uploaded - started, 2),
        "import_job_s": import_s,
        "rows_per_s": None if not import_s else round(args.rows / import_s),
        "reconcile_job_s": seconds(last.get("started_at"), last.get("finished_at")),
        "mapped_at_import": report.get("mapped"),
        "mapped_by_reconcile": sum(event["mapped"] or 0 for event in events),
        "worker_peak_rss_mb": round(max(peak_kb, child_peaks.peak_kb()) / 1024, 1),
        "worker_process_peak_rss_mb": round(peak_kb / 1024, 1),
        "import_child_peak_rss_mb": round(child_peaks.peak_kb() / 1024, 1),
        "worker_idle_rss_mb": round(idle_kb / 1024, 1),
        "worker_max_sampled_rss_mb": round(max(rss_samples) / 1024, 1),
        "api_peak_rss_mb": round(api_peak_kb / 1024, 1),
        "target_mb": TARGET_MB,
        "within_target": max(peak_kb, child_peaks.peak_kb()) / 1024 < TARGET_MB,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "how": "jobs api + jobs worker (python -m jobs_cli), one worker slot, default batch 5000",
        "logs": str(work),
    }


def record(result: dict[str, Any]) -> Path:
    """Write the JSON result and append one Markdown line; the JSON path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    label = "1m" if result["rows"] == 1_000_000 else str(result["rows"])
    path = RESULTS / f"imports-{label}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    notes = RESULTS / "imports.md"
    if not notes.exists():
        notes.write_text(
            "# Imports benchmark (bench/imports/measure.py)\n\n"
            "| when | rows | file MB | status | wall s | upload s | import job s | rows/s | "
            "mapped at import | worker peak RSS MB | target < 300 MB |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n"
        )
    met = "met" if result["within_target"] else "missed"
    with notes.open("a") as handle:
        handle.write(
            f"| {result['when']} | {result['rows']:,} | {result['file_mb']} | {result['status']} "
            f"| {result['wall_s']} | {result['upload_s']} | {result['import_job_s']} "
            f"| {result['rows_per_s']} | {result['mapped_at_import']:,} "
            f"| {result['worker_peak_rss_mb']} | {met} |\n"
        )
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the CSV")
    parser.add_argument("--pages", type=int, default=20_000, help="pages of the site target")
    parser.add_argument("--csv", type=Path, help="an existing CSV to import (else generated)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(
            "JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a maintenance database of the server to create the benchmark database on",
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args(argv)
    result = run(args)
    path = record(result)
    print(json.dumps(result, indent=2))
    log(f"results in {path} and {RESULTS / 'imports.md'}")
    return 0 if result["status"] == "done" else 1


if __name__ == "__main__":
    raise SystemExit(main())
