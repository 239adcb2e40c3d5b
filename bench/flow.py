"""Flow control benchmarks (issue 14; decision 0015). One command per question, results in
``bench/results/raw/flow-<what>-<stamp>.{json,md}``:

    # the plain drain (no limits declared) of this tree against another (e.g. a worktree of
    # main), rounds alternated A B B A ..., medians and ratios A/B
    uv run python -m bench.flow ab --b /path/to/main-worktree --rounds 3 --n 10000

    # the same A/B of enqueue 1-by-1, bulk enqueue and latency (bench.run's phases), or of
    # the bulk enqueue alone (a fresh database and a CHECKPOINT before each timed call)
    uv run python -m bench.flow ab --phases enqueue --b /path/to/main-worktree --rounds 3
    uv run python -m bench.flow ab --phases bulk --b /path/to/main-worktree --rounds 6

    # one more side: this tree without the event log (bench/nolog.py), in the same run
    uv run python -m bench.flow ab --b /path/to/main-worktree --variant nolog:JOBS_BENCH_NO_LOG=1

    # a drain of 10,000 jobs over 10 keys with limit 2 (c10), the claim latency under limits
    # with 100,000 queued jobs, and the fairness bound between two orgs
    uv run python -m bench.flow limits

Each figure is measured on the same machine in the same run as what it is compared with; the
machine may be shared (say so beside the figures). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobs_core import JobContext, JobType, Registry

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
DEFAULT_PG = os.environ.get("JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
STARTED = "SELECT count(*) FROM jobs WHERE status <> 'queued'"
UNFINISHED = "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')"


def noop(ctx: JobContext) -> None:
    return None


registry = Registry("bench-flow")
"""The worker of the limited drain loads this (``JOBS_EXTRA_REGISTRIES=bench.flow:registry``)."""
registry.register(JobType("limited", noop, concurrency_key="key", concurrency_limit=2))
registry.register(JobType("plain_noop", noop))


def log(*parts: object) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}]", *parts, file=sys.stderr, flush=True)


def write(out: Path, name: str, document: Mapping[str, Any], markdown: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = out / f"flow-{name}-{stamp}"
    path.with_suffix(".json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    path.with_suffix(".md").write_text(markdown)
    log("wrote", path.with_suffix(".md"))
    return path


# -- A/B of the plain drain ------------------------------------------------------------------


def _bench_run(
    root: Path, side: str, phases: str, *, n: int, pg_url: str, out: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """The summary of one ``bench.run --phases <phases>`` round of the tree at ``root`` (its own
    virtualenv), with ``env`` added to the environment of the run and its worker."""
    python = root / ".venv" / "bin" / "python"
    command = [
        str(python), "-m", "bench.run", "--pg-url", pg_url, "--phases", phases, "--n", str(n),
        "--history", "0", "--rounds", "1", "--db", f"bench_flow_{side}", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(
        command, cwd=root, check=True, stdout=subprocess.DEVNULL, env={**os.environ, **env}
    )
    (result,) = sorted(out.glob("2*.json"))
    summary: dict[str, Any] = json.loads(result.read_text())["summary"]
    return summary


def _drain_once(
    root: Path, side: str, n: int, pg_url: str, out: Path, *, env: Mapping[str, str] | None = None
) -> dict[str, float]:
    """One c1 and one c10 drain (``bench.run --phases drain``) of the tree at ``root``."""
    summary = _bench_run(root, side, "drain", n=n, pg_url=pg_url, out=out, env=env or {})
    drain = summary["drain"]
    figures: dict[str, float] = {}
    for cfg, name in (("default", "c1"), ("c10", "c10")):
        figures[name] = float(drain[cfg]["jps"])  # from the worker's spawn: start-up included
        figures[f"{name}_active"] = float(drain[cfg]["active_jps"])  # from its first job
        figures[f"{name}_startup_s"] = float(drain[cfg]["startup_s"])
    return figures


FIGURES = ("c1", "c10", "c1_active", "c10_active", "c1_startup_s", "c10_startup_s")
"""What one drain gives: jobs/s from the worker's spawn (``c1``, ``c10``), jobs/s from its
first job (``*_active``: the drain alone), and seconds from its spawn to its first job."""


def _enqueue_once(
    root: Path, side: str, n: int, pg_url: str, out: Path, *, env: Mapping[str, str] | None = None
) -> dict[str, float]:
    """One ``bench.run --phases enqueue,latency`` of the tree at ``root``."""
    summary = _bench_run(root, side, "enqueue,latency", n=n, pg_url=pg_url, out=out, env=env or {})
    return {
        "enqueue_single": float(summary["enqueue_single"]["jps"]),
        "enqueue_bulk": float(summary["enqueue_bulk"]["jps"]),
        "latency_p50_ms": float(summary["latency"]["p50_ms"]),
        "latency_p99_ms": float(summary["latency"]["p99_ms"]),
    }


# One bulk enqueue in a fresh database, run by the tree's own interpreter with only bench.wiring
# and bench.common, which every tree since 8db057f has (bench.nolog may be missing there, hence
# the triggers disabled here): migrate, the log's triggers off under JOBS_BENCH_NO_LOG=1,
# CHECKPOINT (no dirty page of an earlier phase is written during the call), a warm-up call of
# 50, one timed call of n; the database is dropped after.
_BULK_SCRIPT = """
import os, sys, time
sys.path.insert(0, os.getcwd())
import psycopg
from bench import wiring
from bench.common import NOOP, ORG, drop_database, make_registry, payloads, scalar
from bench.common import recreate_database
server, db, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
url = recreate_database(server, db)
wiring.migrate(url)
with psycopg.connect(url, autocommit=True) as conn:
    if os.environ.get("JOBS_BENCH_NO_LOG") == "1":
        conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
    conn.execute("CHECKPOINT")
with wiring.service(url, make_registry(lambda record: None)) as service:
    service.enqueue_many(ORG, NOOP, payloads(range(10**9, 10**9 + 50)))
    docs = payloads(range(n))
    began = time.perf_counter()
    service.enqueue_many(ORG, NOOP, docs)
    elapsed = time.perf_counter() - began
stored = scalar(url, "SELECT count(*) FROM jobs")
drop_database(server, db)
if stored != n + 50:
    sys.exit(f"{stored} jobs stored, {n + 50} enqueued")
print(n / elapsed)
"""


def _bulk_once(
    root: Path, side: str, n: int, pg_url: str, out: Path, *, env: Mapping[str, str] | None = None
) -> dict[str, float]:
    """One bulk enqueue of ``n`` jobs by the tree at ``root`` (see ``_BULK_SCRIPT``)."""
    python = root / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _BULK_SCRIPT, pg_url, f"bench_flow_{side}", str(n)],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return {"enqueue_bulk": float(done.stdout.split()[-1])}


ENQUEUE_FIGURES = ("enqueue_single", "enqueue_bulk", "latency_p50_ms", "latency_p99_ms")
"""What one enqueue-and-latency run gives: jobs/s of ``n`` enqueues one call each and of one
call of ``n``; milliseconds from an enqueue call to its handler's start (lower is better)."""


def ab(args: argparse.Namespace) -> None:
    once, names = {
        "drain": (_drain_once, FIGURES),
        "enqueue": (_enqueue_once, ENQUEUE_FIGURES),
        "bulk": (_bulk_once, ("enqueue_bulk",)),
    }[args.phases]
    sides = {"A": ROOT, "B": Path(args.b).resolve()}
    envs: dict[str, dict[str, str]] = {}
    for variant in args.variant:  # more sides: this tree with extra environment
        name, _, assignments = variant.partition(":")
        sides[name] = ROOT
        envs[name] = dict(pair.split("=", 1) for pair in assignments.split(",") if pair)
    figures: dict[str, dict[str, list[float]]] = {s: {f: [] for f in names} for s in sides}
    order = []
    for round_ in range(args.rounds):
        order += list(sides) if round_ % 2 == 0 else list(reversed(sides))
    with tempfile.TemporaryDirectory(prefix="bench-flow-ab-") as tmp:
        for index, side in enumerate(order):
            out = Path(tmp, f"{index}-{side}")
            got = once(sides[side], side.lower(), args.n, args.pg_url, out, env=envs.get(side))
            log(f"run {index + 1}/{len(order)} side {side}: {json.dumps(got)}")
            for cfg, value in got.items():
                figures[side][cfg].append(value)
    medians = {s: {c: statistics.median(v) for c, v in f.items()} for s, f in figures.items()}

    def paired(x: str, y: str) -> dict[str, tuple[float, float, float]]:
        """Per figure, the ratios x/y of the runs of the same round (adjacent in time, so a
        drift of the machine's speed during the run cancels): median, min, max."""
        per_figure = {}
        for c in names:
            each = [a / b for a, b in zip(figures[x][c], figures[y][c], strict=True)]
            per_figure[c] = (
                round(statistics.median(each), 3),
                round(min(each), 3),
                round(max(each), 3),
            )
        return per_figure

    ratios = paired("A", "B")
    variant_ratios = {name: paired(name, "B") for name in envs}
    a_over_variant = {name: paired("A", name) for name in envs}
    spread = {
        s: {c: [round(min(v), 1), round(max(v), 1)] for c, v in f.items()}
        for s, f in figures.items()
    }
    document = {
        "a": str(sides["A"]),
        "b": str(sides["B"]),
        "a_commit": _commit(sides["A"]),
        "b_commit": _commit(sides["B"]),
        "n": args.n,
        "phases": args.phases,
        "order": order,
        "jps": figures,
        "median_jps": medians,
        "ratio_a_over_b": ratios,
        "variants": envs,
        "ratio_variant_over_b": variant_ratios,
        "ratio_a_over_variant": a_over_variant,
        "min_max_jps": spread,
    }

    def row(label: str, x: str, y: str, r: tuple[float, float, float], c: str) -> str:
        return (
            f"| {label} | {medians[x][c]:.4g} | {medians[y][c]:.4g} | **{r[0]:.3f}** "
            f"({r[1]:.3f} to {r[2]:.3f}) |"
        )

    rows = "\n".join(row(c, "A", "B", ratios[c], c) for c in names)
    for name, env in envs.items():
        rows += "\n" + "\n".join(
            row(f"{c}: {name} ({env}) over B", name, "B", variant_ratios[name][c], c) for c in names
        )
        rows += "\n" + "\n".join(
            row(f"{c}: A over {name}", "A", name, a_over_variant[name][c], c)
            for c in names
            if not c.endswith("startup_s")
        )
    legend = (
        "`enqueue_single`: jobs/s of n enqueues, one call each; `enqueue_bulk`: jobs/s of one call"
        " of n; `latency_*_ms`: enqueue call to handler start, one job at a time to an idle c1"
        " worker (lower is better, so A/B above 1 is slower)."
        if args.phases == "enqueue"
        else "`enqueue_bulk`: jobs/s of one call of n into a fresh database, after a CHECKPOINT"
        " and a warm-up call of 50."
        if args.phases == "bulk"
        else "`c1`, `c10`: jobs/s from the worker's spawn (its start-up counted); `*_active`:"
        " jobs/s from its first job; `*_startup_s`: seconds from its spawn to its first job."
    )
    title = {"drain": "Plain drain", "enqueue": "Enqueue and latency", "bulk": "Bulk enqueue"}[
        args.phases
    ]
    write(
        args.out,
        "ab" if args.phases == "drain" else f"ab-{args.phases}",
        document,
        f"# {title} A/B ({args.n} no-op jobs, {args.rounds} rounds, order {' '.join(order)})"
        f"\n\nA = {document['a_commit']}, B = {document['b_commit']}; medians. {legend}\n\n"
        "Ratio: the median of the per-round ratios (the runs of a round are adjacent in time,"
        " so a drift of the machine's speed cancels), then their min and max.\n\n"
        "| figure | first side (median) | second side (median) | ratio |\n"
        f"|---|---|---|---|\n{rows}\n\n"
        f"Every run: {json.dumps(figures)}\n\nMin/max: {json.dumps(spread)}\n",
    )


def _commit(root: Path) -> str:
    run = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return run.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    from bench.flow_limits import fair, limits  # they import this module

    parser = argparse.ArgumentParser(
        prog="python -m bench.flow", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--pg-url", default=DEFAULT_PG, help="server URL (env JOBS_BENCH_PG_URL)")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="where the results go (default bench/results/raw)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("ab", help="the plain drain (or enqueue) of this tree against --b")
    a.add_argument("--b", required=True, help="the other tree (a worktree of main, synced)")
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="one more side: this tree with that environment (e.g. fair:JOBS_FAIR_CLAIM=1)",
    )
    a.add_argument("--n", type=int, default=10_000)
    a.add_argument(
        "--phases",
        choices=("drain", "enqueue", "bulk"),
        default="drain",
        help="drain: c1 and c10 drains (default); enqueue: enqueue 1-by-1, bulk, and latency;"
        " bulk: one bulk enqueue into a fresh database after a CHECKPOINT",
    )
    a.set_defaults(run=ab)
    lm = sub.add_parser("limits", help="limited drain, claim latency, fairness")
    lm.add_argument("--n", type=int, default=10_000)
    lm.add_argument("--rounds", type=int, default=3)
    lm.add_argument("--queued", type=int, default=100_000)
    lm.add_argument("--claims", type=int, default=300)
    lm.add_argument("--skip-drain", action="store_true", help="only latency and fairness")
    lm.set_defaults(run=limits)
    fa = sub.add_parser("fair", help="the fairness bound between orgs and the fair claim's cost")
    fa.add_argument("--queued", type=int, default=100_000)
    fa.add_argument("--claims", type=int, default=300)
    fa.set_defaults(run=fair)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    finally:
        if args.command in ("limits", "fair"):  # ab's rounds drop their own databases
            from bench.common import drop_database
            from bench.flow_limits import DATABASES

            for name in DATABASES:
                drop_database(args.pg_url, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
