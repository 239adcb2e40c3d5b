"""The results of a chaos run: the document's environment, its JSON and Markdown files."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.chaos.config import (
    ROOT,
)


def db_name(url: str) -> str:
    from sqlalchemy import make_url

    return str(make_url(url).database)


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def environment() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if commit and changed:
        commit += "+uncommitted changes"
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit or None,
        "note": "shared machine: other processes compete for the CPUs; read rates as rough",
    }


# -- results files ---------------------------------------------------------------------------------
def write_results(document: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """``chaos-<stamp>.json`` and ``.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = out / f"chaos-{stamp}.json"
    md_path = out / f"chaos-{stamp}.md"
    document["stamp"] = stamp
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    md_path.write_text(markdown(document))
    return json_path, md_path


def markdown(document: dict[str, Any]) -> str:
    """The short human summary of a results document."""
    f = document["figures"]
    v = document["verdict"]
    env = document["environment"]
    verdict = "every invariant held" if document["ok"] else "AN INVARIANT BROKE"
    lines = [
        f"# Chaos run {document.get('stamp', '')}: {verdict}",
        "",
        f"`{document['command']}` (seed {document['config']['seed']}; commit "
        f"{env['commit']}; PostgreSQL {env['postgres']}; {env['cpus']} CPUs, shared machine, "
        f"load {env['load_avg_at_end'][0]} at the end)",
        "",
        "| jobs | workers x slots | kills -9 | PG restarts (fast/immediate) | terminated backends "
        "| blackholes (s) | cancels | duration | throughput |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {f['jobs']:,} | {f['workers']} x {f['concurrency']} | {f['kills']} "
        f"| {f['pg_restarts']} ({f['pg_restarts_fast']}/{f['pg_restarts_immediate']}) "
        f"| {f['terminated_backends']} | {f['blackholes']} ({f['blackhole_s']}) "
        f"| {f['cancels_requested']} | {f['duration_s']} s "
        f"| {f['throughput_jobs_per_s'] or '-'} jobs/s |",
        "",
        "| invariant | violations |",
        "| --- | --- |",
        f"| lost (not done/failed/cancelled, or missing) | {f['lost']} |",
        f"| overlapping executions of one job | {f['overlaps']} ({f['overlap_s']} s) |",
        f"| attempts over max_attempts | {f['over_attempts']} |",
        f"| status inconsistent with the handlers | {f['inconsistent']} |",
        f"| execution started after the job finished | {f['late_starts']} |",
        f"| end rows without a start row | {v['violations']['orphan_ends']} |",
        "",
        f"Statuses: {', '.join(f'{k} {n:,}' for k, n in sorted(f['statuses'].items()))}. "
        f"Executions recorded: {f['executions']:,} ({v['open_executions_killed']} cut by a kill, "
        f"{v['open_executions_unexplained']} without an end otherwise; "
        f"{v['reruns_after_success']} re-runs after a success whose outcome was lost). "
        f"Worker replacements: {f['replacements']} "
        f"({f['unexpected_worker_exits']} exits nobody asked for). "
        f"Blackholes with a long job held: {f['blackholes_holding_long_job']}.",
    ]
    if not f["finished"]:
        lines += ["", "**The jobs did not all finish before the timeout.**"]
    for name, samples in v.get("samples", {}).items():
        lines += ["", f"## {name} (first {len(samples)})", "", "```"]
        lines += [json.dumps(sample, default=str) for sample in samples[:5]]
        lines += ["```"]
    return "\n".join(lines) + "\n"
