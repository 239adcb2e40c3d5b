"""Flow control benchmarks (issue 14; decision 0015). One command per question, results in
``bench/results/flow-<what>-<stamp>.{json,md}``:

    # the plain drain (no limits declared) of this tree against another (e.g. a worktree of
    # main), rounds alternated A B B A ..., medians and ratios A/B
    uv run python -m bench.flow ab --b /path/to/main-worktree --rounds 3 --n 10000

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
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from jobs_core import Done, JobContext, JobType, Registry, SystemClock, domain

from bench import wiring
from bench.common import recreate_database, scalar

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DEFAULT_PG = os.environ.get("JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
STARTED = "SELECT count(*) FROM jobs WHERE status <> 'queued'"
UNFINISHED = "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')"


def _noop(ctx: JobContext) -> None:
    return None


registry = Registry("bench-flow")
"""The worker of the limited drain loads this (``JOBS_EXTRA_REGISTRIES=bench.flow:registry``)."""
registry.register(JobType("limited", _noop, concurrency_key="key", concurrency_limit=2))
registry.register(JobType("plain_noop", _noop))


def log(*parts: object) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}]", *parts, file=sys.stderr, flush=True)


def write(name: str, document: Mapping[str, Any], markdown: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"flow-{name}-{stamp}"
    path.with_suffix(".json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    path.with_suffix(".md").write_text(markdown)
    log("wrote", path.with_suffix(".md"))
    return path


# -- A/B of the plain drain ------------------------------------------------------------------


def _drain_once(
    root: Path, side: str, n: int, pg_url: str, out: Path, *, env: Mapping[str, str] | None = None
) -> dict[str, float]:
    """One ``bench.run --phases drain`` of the tree at ``root`` (its own virtualenv), with
    ``env`` added to the environment of the run and its worker."""
    python = root / ".venv" / "bin" / "python"
    command = [
        str(python), "-m", "bench.run", "--pg-url", pg_url, "--phases", "drain", "--n", str(n),
        "--history", "0", "--rounds", "1", "--db", f"bench_flow_{side}", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(
        command, cwd=root, check=True, stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    (result,) = sorted(out.glob("2*.json"))
    drain = json.loads(result.read_text())["summary"]["drain"]
    figures: dict[str, float] = {}
    for cfg, name in (("default", "c1"), ("c10", "c10")):
        figures[name] = float(drain[cfg]["jps"])  # from the worker's spawn: start-up included
        figures[f"{name}_active"] = float(drain[cfg]["active_jps"])  # from its first job
        figures[f"{name}_startup_s"] = float(drain[cfg]["startup_s"])
    return figures


FIGURES = ("c1", "c10", "c1_active", "c10_active", "c1_startup_s", "c10_startup_s")
"""What one drain gives: jobs/s from the worker's spawn (``c1``, ``c10``), jobs/s from its
first job (``*_active``: the drain alone), and seconds from its spawn to its first job."""


def ab(args: argparse.Namespace) -> None:
    sides = {"A": ROOT, "B": Path(args.b).resolve()}
    envs: dict[str, dict[str, str]] = {}
    for variant in args.variant:  # more sides: this tree with extra environment
        name, _, assignments = variant.partition(":")
        sides[name] = ROOT
        envs[name] = dict(pair.split("=", 1) for pair in assignments.split(",") if pair)
    figures: dict[str, dict[str, list[float]]] = {s: {f: [] for f in FIGURES} for s in sides}
    order = []
    for round_ in range(args.rounds):
        order += list(sides) if round_ % 2 == 0 else list(reversed(sides))
    with tempfile.TemporaryDirectory(prefix="bench-flow-ab-") as tmp:
        for index, side in enumerate(order):
            out = Path(tmp, f"{index}-{side}")
            got = _drain_once(
                sides[side], side.lower(), args.n, args.pg_url, out, env=envs.get(side)
            )
            log(
                f"run {index + 1}/{len(order)} side {side}: c1 {got['c1']} c10 {got['c10']} j/s"
                f" (from the first job: {got['c1_active']}, {got['c10_active']}; start-up"
                f" {got['c1_startup_s']} s, {got['c10_startup_s']} s)"
            )
            for cfg, value in got.items():
                figures[side][cfg].append(value)
    medians = {s: {c: statistics.median(v) for c, v in f.items()} for s, f in figures.items()}
    ratios = {c: round(medians["A"][c] / medians["B"][c], 3) for c in FIGURES}
    variant_ratios = {
        name: {c: round(medians[name][c] / medians["B"][c], 3) for c in FIGURES} for name in envs
    }
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
        "order": order,
        "jps": figures,
        "median_jps": medians,
        "ratio_a_over_b": ratios,
        "variants": envs,
        "ratio_variant_over_b": variant_ratios,
        "min_max_jps": spread,
    }
    rows = "\n".join(
        f"| {c} | {medians['A'][c]:.3g} | {medians['B'][c]:.3g} | {ratios[c]:.3f} |"
        for c in FIGURES
    )
    for name, env in envs.items():
        rows += "\n" + "\n".join(
            f"| {c} ({name}: {env}) | {medians[name][c]:.3g} | {medians['B'][c]:.3g} | "
            f"{variant_ratios[name][c]:.3f} |"
            for c in FIGURES
        )
    write(
        "ab",
        document,
        f"# Plain drain A/B ({args.n} no-op jobs, {args.rounds} rounds, order {' '.join(order)})"
        f"\n\nA = {document['a_commit']}, B = {document['b_commit']}; medians. `c1`, `c10`: jobs/s"
        " from the worker's spawn (its start-up counted); `*_active`: jobs/s from its first job;"
        " `*_startup_s`: seconds from its spawn to its first job.\n\n"
        f"| figure | A | B | A/B |\n|---|---|---|---|\n{rows}\n\n"
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


# -- limits: drain, claim latency, fairness ----------------------------------------------------


def _timed_drain(url: str, concurrency: int) -> float:
    """Spawn one worker (``python -m jobs_worker``) with this module's registry; seconds from
    its first claim until nothing is queued or running (its start-up is not counted)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(
        JOBS_DATABASE_URL=url,
        JOBS_CONCURRENCY=str(concurrency),
        JOBS_EXTRA_REGISTRIES="bench.flow:registry",
        PYTHONPATH=str(ROOT),
    )
    began = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobs_worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not scalar(url, STARTED):
            if worker.poll() is not None:
                raise RuntimeError("the worker exited")
            time.sleep(0.01)
        began = time.perf_counter()
        while scalar(url, UNFINISHED):
            if worker.poll() is not None:
                raise RuntimeError("the worker exited")
            time.sleep(0.01)
        return time.perf_counter() - began
    finally:
        worker.terminate()
        worker.wait(60)


def _claim_latency(
    service: Any, claims: int, limits: Any, types: list[str]
) -> dict[str, float | None]:
    store, timings = service.store, []
    for _ in range(claims):
        began = time.perf_counter()
        got = store.claim(1, SystemClock().now(), types, limits=limits)
        timings.append((time.perf_counter() - began) * 1000)
        for job in got:
            store.complete([domain.patch(job.ref, Done(), SystemClock().now())])
    timings.sort()
    return {
        "p50_ms": round(statistics.median(timings), 2),
        "p95_ms": round(timings[int(len(timings) * 0.95) - 1], 2),
        "max_ms": round(timings[-1], 2),
    }


def limits(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {"n": args.n, "keys": 10, "key_limit": 2}
    lim = registry.flow_limits()
    url = recreate_database(args.pg_url, "bench_flow_limits")
    wiring.migrate(url)
    drains: dict[str, list[float]] = {"limited": [], "plain": []}
    for round_ in range(0 if args.skip_drain else args.rounds):
        for kind in ("limited", "plain") if round_ % 2 == 0 else ("plain", "limited"):
            with wiring.service(url, registry) as service:
                type_name = "limited" if kind == "limited" else "plain_noop"
                service.enqueue_many(
                    "bench", type_name, [{"key": f"k{i % 10}"} for i in range(args.n)]
                )
            seconds = _timed_drain(url, 10)
            drains[kind].append(args.n / seconds)
            log(f"drain {kind} c10: {args.n / seconds:.0f} j/s")
    result["drain_c10_jps"] = {
        k: round(statistics.median(v)) if v else None for k, v in drains.items()
    }
    result["drain_c10_every"] = drains

    # claim latency, 100,000 queued (1,000 keys; then 10,000 of one saturated key at the head)
    url = recreate_database(args.pg_url, "bench_flow_latency")
    wiring.migrate(url)
    with wiring.service(url, registry) as service:
        service.enqueue_many(
            "bench", "limited", [{"key": f"k{i % 1000}"} for i in range(args.queued)]
        )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobs")
        result["queued"] = args.queued
        result["claim_limited"] = _claim_latency(service, args.claims, lim, ["limited"])
    # the plain claim, the same 100,000 jobs of a type without limits, on their own
    url = recreate_database(args.pg_url, "bench_flow_latency")
    wiring.migrate(url)
    with wiring.service(url, registry) as service:
        service.enqueue_many(
            "bench", "plain_noop", [{"key": f"k{i % 1000}"} for i in range(args.queued)]
        )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobs")
        result["claim_plain"] = _claim_latency(service, args.claims, None, ["plain_noop"])
    url = recreate_database(args.pg_url, "bench_flow_latency")
    wiring.migrate(url)
    with wiring.service(url, registry) as service:
        service.enqueue_many("bench", "limited", [{"key": "busy"}] * 2)
        service.store.claim(2, SystemClock().now(), ["limited"], limits=lim)  # key full
        service.enqueue_many("bench", "limited", [{"key": "busy"}] * 10_000)
        service.enqueue_many(
            "bench", "limited", [{"key": f"k{i % 1000}"} for i in range(args.queued - 10_000)]
        )
        result["claim_limited_saturated_head"] = _claim_latency(
            service, args.claims, lim, ["limited"]
        )
    # fairness: org B's one job behind org A's queue, claims of 10 (a c10 worker's batch)
    url = recreate_database(args.pg_url, "bench_flow_fair")
    wiring.migrate(url)
    with wiring.service(url, registry) as service:
        service.enqueue_many("org-a", "plain_noop", [{"key": "a"}] * args.queued)
        target = service.enqueue("org-b", "plain_noop", {"key": "b"}).job.id
        claims = 0
        while True:
            claims += 1
            got = service.store.claim(1000, SystemClock().now(), ["plain_noop"])
            if any(job.id == target for job in got) or not got:
                break
        result["fairness"] = {
            "org_a_queued": args.queued,
            "claims_of_1000_until_org_b_starts": claims,
            "org_b_position": (claims - 1) * 1000 + 1,
        }
    write("limits", result, _limits_markdown(result))


def _limits_markdown(r: Mapping[str, Any]) -> str:
    def lat(d: Mapping[str, Any]) -> str:
        return f"p50 {d['p50_ms']} ms, p95 {d['p95_ms']} ms, max {d['max_ms']} ms"

    fair = r["fairness"]
    drain = (
        f"- drain of {r['n']:,} no-op jobs over 10 keys, limit 2 per key, one worker c10: "
        f"**{r['drain_c10_jps']['limited']} jobs/s** (the same jobs without a limit: "
        f"{r['drain_c10_jps']['plain']} jobs/s)\n"
        if r["drain_c10_jps"]["limited"]
        else ""
    )
    return (
        "# Flow control figures\n\n"
        f"{drain}"
        f"- claim of one job with {r['queued']:,} queued over 1,000 keys, limits declared: "
        f"{lat(r['claim_limited'])}; plain claim, {r['queued']:,} queued: {lat(r['claim_plain'])}\n"
        f"- the same with 10,000 jobs of one full key at the head: "
        f"{lat(r['claim_limited_saturated_head'])}\n"
        f"- fairness (FIFO, none built in): with org A holding {fair['org_a_queued']:,} queued "
        f"jobs, org B's job enqueued after them is the {fair['org_b_position']:,}th claimed\n"
    )


# -- fairness between orgs: the bound and the claim's cost -------------------------------------


def _claims_until(service: Any, target: Any, batch: int) -> int:
    """Claims of ``batch`` (each claimed job finished at once) until ``target`` starts."""
    claims = 0
    while True:
        claims += 1
        got = service.claim(batch)
        for job in got:
            service.store.complete([domain.patch(job.ref, Done(), SystemClock().now())])
        if not got or any(job.id == target for job in got):
            return claims


def fair(args: argparse.Namespace) -> None:
    """Org B's single job behind org A's ``--queued`` jobs: the claims until it starts, with
    the fair claim (claims of 1 and of 10) and with the plain one; then the latency of a claim
    of 1 at that depth, fair and plain alternated."""
    from jobs_core import JobService

    # no type declares a limit: the fair order does not apply under limits (decision 0015)
    plain_types = Registry("bench-fair")
    plain_types.register(JobType("plain_noop", _noop))
    result: dict[str, Any] = {"org_a_queued": args.queued}
    url = recreate_database(args.pg_url, "bench_flow_fairness")
    wiring.migrate(url)
    with wiring.service(url, plain_types) as plain:
        fair_service = JobService(plain.store, plain_types, fair_claim=True)
        for others in (0, 9):
            for batch in (1, 10):
                plain.enqueue_many("org-a", "plain_noop", [{"key": "a"}] * args.queued)
                for i in range(others):
                    plain.enqueue_many(f"org-{i:02d}", "plain_noop", [{"key": "x"}] * 100)
                target = plain.enqueue("org-b", "plain_noop", {"key": "b"}).job.id
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("ANALYZE jobs")
                service = JobService(plain.store, plain_types, fair_claim=True)
                claims = _claims_until(service, target, batch)
                result[f"fair_claims_of_{batch}_with_{others + 2}_orgs"] = claims
                log(f"fair, {others + 2} orgs, claims of {batch}: org B starts at claim {claims}")
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("DELETE FROM jobs")
                    conn.execute("VACUUM jobs")
        plain.enqueue_many("org-a", "plain_noop", [{"key": "a"}] * args.queued)
        target = plain.enqueue("org-b", "plain_noop", {"key": "b"}).job.id
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE jobs")
        timings: dict[str, list[float]] = {"plain": [], "fair": []}
        for index in range(2 * args.claims):
            side = "plain" if index % 2 == 0 else "fair"
            began = time.perf_counter()
            got = (plain if side == "plain" else fair_service).claim(1)
            timings[side].append((time.perf_counter() - began) * 1000)
            for job in got:
                plain.store.complete([domain.patch(job.ref, Done(), SystemClock().now())])
        for side, values in timings.items():
            values.sort()
            result[f"claim_latency_{side}"] = {
                "p50_ms": round(statistics.median(values), 2),
                "p95_ms": round(values[int(len(values) * 0.95) - 1], 2),
                "max_ms": round(values[-1], 2),
            }
        plain_claims = _claims_until(plain, target, 1000)
        result["plain_org_b_position_at_most"] = plain_claims * 1000
    lines = "\n".join(f"- {key}: {value}" for key, value in result.items())
    write(
        "fair",
        result,
        f"# Fairness between orgs ({args.queued:,} queued jobs of org A)\n\n{lines}\n\n"
        "Claims are counted, not timed (the bound does not depend on the machine); the\n"
        "latencies are of one process on a shared 2-core machine.\n",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.flow", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--pg-url", default=DEFAULT_PG, help="server URL (env JOBS_BENCH_PG_URL)")
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("ab", help="the plain drain of this tree against --b")
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
    args.run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
