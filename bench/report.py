"""The Markdown table of a ``bench.run`` results document (medians, rounds beside them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.common import median

Getter = Callable[[dict[str, Any]], Any]


def get(doc: Any, *path: str) -> Any:
    """``doc[path[0]][path[1]]...``, None where a step is missing."""
    for key in path:
        if not isinstance(doc, dict) or doc.get(key) is None:
            return None
        doc = doc[key]
    return doc


def fmt(value: Any, digits: int | None = None) -> str:
    """A number for a table: thousands separators; 0 decimals from 100 up (or ``digits``)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if digits is None:
        digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f}"


def _row(label: str, rounds: list[dict[str, Any]], getter: Getter, digits: int | None) -> str:
    values = [getter(r) for r in rounds]
    cells = " / ".join(fmt(v, digits) for v in values)
    return f"| {label} | **{fmt(median(values), digits)}** | {cells} |"


def targets(summary: dict[str, Any], history: int) -> list[tuple[str, str, str, bool | None]]:
    """The targets this benchmark can judge alone (the peer ratios need ``bench/peers.sh``)."""
    out: list[tuple[str, str, str, bool | None]] = []

    def add(name: str, want: str, value: Any, ok: bool | None) -> None:
        out.append((name, want, fmt(value), ok))

    bulk = get(summary, "enqueue_bulk", "jps")
    add("bulk enqueue", "≥ 50,000 jobs/s", bulk, None if bulk is None else bulk >= 50_000)
    p99 = get(summary, "latency", "p99_ms")
    add("latency p99", "< 20 ms", p99, None if p99 is None else p99 < 20)
    for cfg in ("default", "c10"):
        ratio = get(summary, "ratios", f"history_over_empty_{cfg}")
        add(
            f"drain {cfg} with {history:,} finished rows / empty",
            "≥ 0.90",
            ratio,
            None if ratio is None else ratio >= 0.9,
        )
    return out


def render_markdown(doc: dict[str, Any]) -> str:
    """The results document as Markdown."""
    rounds: list[dict[str, Any]] = doc.get("rounds") or []
    m = doc.get("machine") or {}
    o = doc.get("options") or {}
    pg = m.get("postgres") or {}
    lines = [
        f"### jobs benchmark, {doc.get('started')}",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
        f"{m.get('os')}; Python {m.get('python')}; PostgreSQL {pg.get('server_version')} "
        f"(shared_buffers {pg.get('shared_buffers')}, synchronous_commit "
        f"{pg.get('synchronous_commit')}) on loopback; load average at start "
        f"{m.get('loadavg_at_start')}; commit {m.get('commit')}.",
        "",
        f"N = {o.get('n'):,} jobs; {len(rounds)} round(s), {doc.get('elapsed_s')} s. "
        "Bold = median over rounds; then each round.",
        "",
        "| figure | median | rounds |",
        "|---|---|---|",
    ]
    h = o.get("history") or 0
    rows: list[tuple[str, Getter, int | None]] = [
        ("enqueue 1-by-1, jobs/s", lambda r: get(r, "enqueue_single", "jps"), 0),
        ("enqueue bulk (one call), jobs/s", lambda r: get(r, "enqueue_bulk", "jps"), 0),
        ("drain default (concurrency 1), jobs/s", lambda r: get(r, "drain", "default", "jps"), 0),
        ("drain c10, jobs/s", lambda r: get(r, "drain", "c10", "jps"), 0),
        (
            "drain default, active (first start → done), jobs/s",
            lambda r: get(r, "drain", "default", "active_jps"),
            0,
        ),
        ("drain c10, active, jobs/s", lambda r: get(r, "drain", "c10", "active_jps"), 0),
        ("worker startup (spawn → first job), s", lambda r: get(r, "drain", "c10", "startup_s"), 2),
        (
            f"drain default with {h:,} finished rows, jobs/s",
            lambda r: get(r, "drain", "default_history", "jps"),
            0,
        ),
        (
            f"drain c10 with {h:,} finished rows, jobs/s",
            lambda r: get(r, "drain", "c10_history", "jps"),
            0,
        ),
        (
            "history / empty, default (in-round ratio)",
            lambda r: get(r, "ratios", "history_over_empty_default"),
            3,
        ),
        ("history / empty, c10", lambda r: get(r, "ratios", "history_over_empty_c10"), 3),
        ("c10 / default", lambda r: get(r, "ratios", "c10_over_default"), 2),
        (
            "latency p50, ms (enqueue call → handler start)",
            lambda r: get(r, "latency", "p50_ms"),
            2,
        ),
        ("latency p95, ms", lambda r: get(r, "latency", "p95_ms"), 2),
        ("latency p99, ms", lambda r: get(r, "latency", "p99_ms"), 2),
        ("latency max, ms", lambda r: get(r, "latency", "max_ms"), 2),
        (
            "pickup p50, ms (enqueue return → start)",
            lambda r: get(r, "latency", "pickup_p50_ms"),
            2,
        ),
        (
            f"API GET /jobs/{{id}}, {o.get('api_connections')} clients back to back, req/s",
            lambda r: get(r, "api", "throughput", "rps"),
            0,
        ),
        ("  … their p50, ms", lambda r: get(r, "api", "throughput", "p50_ms"), 2),
        ("  … their p99, ms", lambda r: get(r, "api", "throughput", "p99_ms"), 2),
        (
            f"API, {o.get('api_pollers')} pollers every {o.get('api_poll_interval_s')} s: p50, ms",
            lambda r: get(r, "api", "pollers", "p50_ms"),
            2,
        ),
        ("  … p99, ms", lambda r: get(r, "api", "pollers", "p99_ms"), 2),
    ]
    for label, getter, digits in rows:
        if any(getter(r) is not None for r in rounds):
            lines.append(_row(label, rounds, getter, digits))
    names = _phase_names(rounds)
    if names:
        lines += ["", "Exactly once (all rounds, drain and latency phases):", ""]
        lines += [
            "| phase | executions | duplicates | missing | unexpected | failed |",
            "|---|---|---|---|---|---|",
        ]
        for name in names:
            ph = [get(r, "drain", name) if name != "latency" else get(r, "latency") for r in rounds]
            ph = [p for p in ph if p]
            lines.append(
                f"| {name} | "
                + " | ".join(
                    fmt(sum(p.get(k) or 0 for p in ph), 0)
                    for k in ("executions", "duplicates", "missing", "unexpected", "failed_after")
                )
                + " |"
            )
    summary = doc.get("summary") or {}
    lines += ["", "Targets this run can judge alone:", ""]
    lines += ["| target | wanted | measured | met |", "|---|---|---|---|"]
    for name, want, value, ok in targets(summary, h):
        if ok is None:
            continue
        lines.append(
            f"| {name} | {want} | {value} | {'-' if ok is None else 'yes' if ok else 'NO'} |"
        )
    errors = doc.get("errors") or []
    if errors:
        lines += ["", "Errors:", ""] + [f"- {e}" for e in errors]
    return "\n".join(lines) + "\n"


def _phase_names(rounds: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in rounds:
        for name in r.get("drain") or {}:
            if name not in names:
                names.append(name)
    if any(r.get("latency") for r in rounds):
        names.append("latency")
    return names
