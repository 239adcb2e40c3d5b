"""jobs against each peer, from a results folder of the shared harness (``bench/peers.sh``).

    uv run python -m bench.peers_report bench/results/raw/peers-<stamp>  > jobs-vs-peers.md

Reads every ``<system>.r<round>.json`` the harness wrote and prints Markdown: the medians of
every system, then **jobs / peer ratios computed inside each round** and medianed (ratios of
the same round share the machine's noise; ratios of medians do not), then the targets of
issue 22 judged on those ratios. A system ``jobsmain`` (``bench/bench_jobsmain.py``: the same
adapter run from another tree, e.g. main) is reported beside jobs and left out of "best peer":
it is the baseline of the default drain's target.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import median
from bench.report import fmt, get

SYSTEM = "jobs"
BASELINE = "jobsmain"
ORDER = ["jobs", "jobsmain", "pgqueuer", "awa", "oban", "procrastinate", "chancy"]

Metric = tuple[str, Callable[[dict[str, Any]], Any], bool]
"""(label, getter, lower is better)."""


def drain_rate(res: dict[str, Any], cfg: str) -> float | None:
    """A drain's jobs/s (a capped drain's partial rate)."""
    d = get(res, "drain", cfg)
    if not isinstance(d, dict):
        return None
    value = d.get("partial_jps") if d.get("timed_out") else d.get("jps")
    return value if isinstance(value, int | float) else None


def best_drain(res: dict[str, Any]) -> float | None:
    """The best drain rate of every configuration the system ran."""
    drains = get(res, "drain")
    rates = [drain_rate(res, cfg) for cfg in drains or {}]
    return max((r for r in rates if r is not None), default=None)


def best_config(res: dict[str, Any]) -> str:
    """The name of the configuration of :func:`best_drain`."""
    drains = get(res, "drain") or {}
    rated = [(drain_rate(res, cfg) or 0.0, cfg) for cfg in drains]
    return max(rated)[1] if rated else "-"


def startup(res: dict[str, Any]) -> float | None:
    """Spawn to the first handler start of the default drain, seconds."""
    value = get(res, "drain", "default", "startup_s")
    return value if isinstance(value, int | float) else None


METRICS: list[Metric] = [
    ("enqueue 1-by-1, jobs/s", lambda x: get(x, "enqueue_single", "jps"), False),
    ("enqueue bulk, jobs/s", lambda x: get(x, "enqueue_bulk", "jps"), False),
    ("drain default, jobs/s", lambda x: drain_rate(x, "default"), False),
    ("drain c10, jobs/s", lambda x: drain_rate(x, "c10"), False),
    ("best configuration drain, jobs/s", best_drain, False),
    ("latency p50, ms", lambda x: get(x, "latency", "p50_ms"), True),
    ("latency p99, ms", lambda x: get(x, "latency", "p99_ms"), True),
    ("worker start-up, s", startup, True),
]


def load(folder: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """system → round → the JSON document of that run."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.r*.json")):
        match = re.fullmatch(r"(.+)\.r(\d+)\.json", path.name)
        if not match:
            continue
        lines = [ln for ln in path.read_text().splitlines() if ln.strip().startswith("{")]
        if lines:
            runs.setdefault(match.group(1), {})[int(match.group(2))] = json.loads(lines[-1])
    return runs


def cpu_model() -> str:
    """The CPU model of this machine (the one the harness ran on)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def same_round(
    runs: dict[str, dict[int, dict[str, Any]]],
    getter: Callable[[dict[str, Any]], Any],
    peers: list[str],
    *,
    best_of: bool,
    lower: bool,
) -> float | None:
    """Median over rounds of jobs' figure / the peers' figure of the same round; with
    ``best_of``, the best peer of that round (highest rate, lowest latency)."""
    ratios = []
    for rnd, mine in runs.get(SYSTEM, {}).items():
        a = getter(mine)
        values = [getter(runs[p][rnd]) for p in peers if rnd in runs[p]]
        values = [v for v in values if isinstance(v, int | float) and v > 0]
        if not isinstance(a, int | float) or not values or (not best_of and len(values) != 1):
            continue
        b = min(values) if lower else max(values)
        ratios.append(a / b)
    return median(ratios)


def exactly_once(runs: dict[int, dict[str, Any]]) -> tuple[int, int, int]:
    """Duplicates, missing, failed, summed over every round and phase of one system."""
    dup = miss = failed = 0
    for res in runs.values():
        phases = dict(get(res, "drain") or {})
        if get(res, "latency"):
            phases["latency"] = res["latency"]
        for ph in phases.values():
            dup += ph.get("duplicates", 0) or 0
            failed += ph.get("failed_after", 0) or 0
            if not ph.get("timed_out"):
                miss += ph.get("missing", 0) or 0
    return dup, miss, failed


def render(folder: Path) -> str:
    """The report as Markdown."""
    runs = load(folder)
    if SYSTEM not in runs:
        return f"no {SYSTEM} results in {folder}\n"
    systems = sorted(runs, key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))
    peers = [s for s in systems if s not in (SYSTEM, BASELINE)]
    first = next(iter(runs[SYSTEM].values()))
    out = [
        f"### jobs and its peers, side by side ({folder.name})",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; PostgreSQL "
        f"{first.get('postgres')} on loopback; N = {first.get('n'):,}; "
        f"{len(runs[SYSTEM])} round(s), peers' order rotated each round; medians.",
        "",
        "| system | versions | "
        + " | ".join(label for label, _, _ in METRICS)
        + " | best configuration | duplicates / missing / failed |",
        "|---|---|" + "---|" * len(METRICS) + "---|---|",
    ]
    for s in systems:
        docs = list(runs[s].values())
        versions = ", ".join(f"{k} {v}" for k, v in (docs[0].get("versions") or {}).items())
        cells = [fmt(median(getter(d) for d in docs)) for _, getter, _ in METRICS]
        dup, miss, failed = exactly_once(runs[s])
        name = f"**{s}**" if s == SYSTEM else s
        configs = sorted({best_config(d) for d in docs})
        out.append(
            f"| {name} | {versions} | "
            + " | ".join(cells)
            + f" | {', '.join(configs)} | {dup} / {miss} / {failed} |"
        )

    out += [
        "",
        "jobs / peer, ratios taken inside each round, then medianed (rates: > 1 means jobs is "
        "faster; latencies: < 1 means jobs answers sooner):",
        "",
        "| jobs / … | " + " | ".join(label.split(",")[0] for label, _, _ in METRICS) + " |",
        "|---|" + "---|" * len(METRICS),
    ]
    for p in [*([BASELINE] if BASELINE in runs else []), *peers, "best peer"]:
        cells = []
        for _, getter, lower in METRICS:
            group = peers if p == "best peer" else [p]
            v = same_round(runs, getter, group, best_of=p == "best peer", lower=lower)
            cells.append(fmt(v, 2))
        out.append(f"| {p} | " + " | ".join(cells) + " |")

    def best(i: int) -> float | None:
        _, getter, lower = METRICS[i]
        return same_round(runs, getter, peers, best_of=True, lower=lower)

    def mine(i: int) -> float | None:
        return median(METRICS[i][1](d) for d in runs[SYSTEM].values())

    def base(i: int) -> float | None:
        _, getter, lower = METRICS[i]
        if BASELINE not in runs:
            return None
        return same_round(runs, getter, [BASELINE], best_of=False, lower=lower)

    dup, miss, _ = exactly_once(runs[SYSTEM])
    checks: list[tuple[str, str, float | None, bool | None]] = [
        ("best configuration drain / best peer's best", "≥ 2", best(4), _ge(best(4), 2)),
        ("drain c10 / best peer's", "≥ 2", best(3), _ge(best(3), 2)),
        (f"drain default / {BASELINE} (same run)", "≥ 2", base(2), _ge(base(2), 2)),
        ("enqueue bulk, jobs/s", "≥ 50,000", mine(1), _ge(mine(1), 50_000)),
        ("enqueue bulk / best peer's", "≥ 1.3", best(1), _ge(best(1), 1.3)),
        ("enqueue 1-by-1 / best peer's", "≥ 1.0", best(0), _ge(best(0), 1.0)),
        ("latency p50 / best peer's", "≤ 1.0", best(5), _le(best(5), 1.0)),
        ("latency p99 / best peer's", "≤ 1.0", best(6), _le(best(6), 1.0)),
        ("worker start-up, s", "≤ 0.3", mine(7), _le(mine(7), 0.3)),
        ("duplicates + missing (all rounds)", "0", dup + miss, dup + miss == 0),
    ]
    out += [
        "",
        "Targets of issue 22:",
        "",
        "| target | wanted | measured | met |",
        "|---|---|---|---|",
    ]
    for name, want, value, ok in checks:
        verdict = "-" if ok is None else "yes" if ok else "NO"
        digits = 2 if value is not None and abs(value) < 100 and value != int(value) else 0
        out.append(f"| {name} | {want} | {fmt(value, digits)} | {verdict} |")
    return "\n".join(out) + "\n"


def _ge(value: float | None, floor: float) -> bool | None:
    return None if value is None else value >= floor


def _le(value: float | None, ceiling: float) -> bool | None:
    return None if value is None else value <= ceiling


def main(argv: list[str] | None = None) -> int:
    """Print the report of the folder given."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(
            "usage: python -m bench.peers_report <results folder of the harness>", file=sys.stderr
        )
        return 2
    sys.stdout.write(render(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
