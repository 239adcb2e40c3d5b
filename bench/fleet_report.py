"""The results of :mod:`bench.fleet` as JSON and as a Markdown summary."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def _row(fleet: dict[str, Any]) -> str:
    once = fleet["exactly_once"]
    exact = "yes" if not (once["duplicates"] or once["missing"]) else f"NO ({once})"
    peak = fleet["server_connections_peak"]
    return (
        f"| {fleet['target']} | {fleet['workers']} x {fleet['slots']} | {fleet['jobs']:,} "
        f"| {fleet['jobs_per_s']} | {fleet['claim']['p50_ms']} / {fleet['claim']['p99_ms']} "
        f"| {fleet['finish_and_claim']['p50_ms']} / {fleet['finish_and_claim']['p99_ms']} "
        f"| {peak['connections']} ({peak['without_listen']} without LISTEN) | {exact} |"
    )


def markdown(results: dict[str, Any]) -> str:
    """The summary of a run."""
    lines = [
        "# Fleet benchmark (`bench.fleet`)",
        "",
        f"Command: `{results['command']}`",
        "",
        "| target | fleet | jobs | jobs/s | claim p50 / p99 (ms) | finish+claim p50 / p99 (ms) "
        "| server connections (peak) | exactly once |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(fleet) for fleet in results["fleets"]),
        "",
        "## The ceiling: drain rate as workers are added",
        "",
    ]
    for name, found in results["ceiling"].items():
        rates = ", ".join(f"{s['workers']}: {s['jobs_per_s']}" for s in found["steps"])
        stop = found["workers"]
        where = f"adding workers stops helping past {stop}" if stop else "every step helped"
        lines += [f"- {name}: jobs/s by workers {rates} ({where})"]
    for fleet in results["fleets"]:
        lines += ["", f"## Where the time goes: {fleet['target']}", ""]
        lines += ["| calls | total ms | mean ms | statement |", "| --- | --- | --- | --- |"]
        for s in fleet["top_statements"]:
            query = s["query"].replace("|", "\\|")
            lines.append(f"| {s['calls']} | {s['total_ms']} | {s['mean_ms']} | `{query}` |")
        waits = ", ".join(f"{w['event']} {w['share']:.0%}" for w in fleet["wait_events"])
        lines += ["", f"Wait events of active backends (sampled): {waits or 'none seen'}"]
    return "\n".join(lines) + "\n"


def write_report(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``fleet-<time>.json`` and ``.md`` into ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / time.strftime("fleet-%Y%m%d-%H%M%S")
    json_path, md_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    json_path.write_text(json.dumps(results, indent=2, default=str))
    md_path.write_text(markdown(results))
    return json_path, md_path
