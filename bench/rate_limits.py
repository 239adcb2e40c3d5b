"""The claim's cost under rate limits per key (issue 25 item 4, decision 0042).

    uv run python -m bench.rate_limits                 # 1,000 keys, 20 queued jobs per key
    uv run python -m bench.rate_limits --keys 1000 --per-key 20 --claims 2000
    uv run python -m bench.rate_limits --keys 5 --per-key 2 --claims 10   # a smoke run

Each side is a fresh database holding ``keys x per-key`` queued jobs of one type (one org, so
the fair claim's default costs what it costs everywhere); a claim of one job is timed through
``JobService.claim`` (fair order, the worker's path) and the job it took is finished at once,
outside the timing. Sides, in this order, each on its own database:

- ``plain``: a type without any limit (the one-statement claim);
- ``concurrency``: ``concurrency_limit=1000`` per key (the two-statement claim under limits,
  no rate: what a deployment with concurrency limits pays today);
- ``rate_room``: ``rate_limit=(1000, 3600)`` per key: every key gets its recorded starts and
  always has room (the rate's reads and writes, nothing passed over);
- ``rate_spent``: ``rate_limit=(1, 3600)`` per key: the first claim of each key spends it, so
  over the run the set of spent keys grows from 0 to ``keys`` and the claim passes over the
  queued jobs of every spent key (with 20 per key, up to 19,000 rows of spent keys behind).

Results: ``bench/results/raw/rate-limits-<stamp>.{json,md}`` (p50, p95, max in ms per side).
The machine may be shared: say so beside the figures. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from jobs_core import Done, JobContext, JobType, Registry, SystemClock, domain

from bench import wiring
from bench.common import drop_database, recreate_database

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "raw"
DATABASE = "bench_rate_limits"
SIDES: dict[str, dict[str, Any]] = {
    "plain": {},
    "concurrency": {"concurrency_key": "key", "concurrency_limit": 1000},
    "rate_room": {"concurrency_key": "key", "rate_limit": (1000, 3600.0)},
    "rate_spent": {"concurrency_key": "key", "rate_limit": (1, 3600.0)},
}


def noop(ctx: JobContext) -> None:
    return None


def log(*parts: object) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}]", *parts, file=sys.stderr, flush=True)


def _registry(declared: Mapping[str, Any]) -> Registry:
    registry = Registry("bench-rates")
    registry.register(JobType("fetch", noop, **declared))
    return registry


def _percentiles(timings: list[float]) -> dict[str, float | None]:
    if not timings:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None, "claims": 0}
    timings = sorted(timings)
    return {
        "p50_ms": round(statistics.median(timings), 3),
        "p95_ms": round(timings[max(0, int(len(timings) * 0.95) - 1)], 3),
        "max_ms": round(timings[-1], 3),
        "claims": len(timings),
    }


def side(pg_url: str, name: str, keys: int, per_key: int, claims: int) -> dict[str, Any]:
    """The latency of ``claims`` claims of one job on a fresh database for side ``name``."""
    url = recreate_database(pg_url, DATABASE)
    wiring.migrate(url)
    registry = _registry(SIDES[name])
    timings: list[float] = []
    empty = 0
    with wiring.service(url, registry) as service:
        payloads = [{"key": f"k{i % keys}"} for i in range(keys * per_key)]
        for start in range(0, len(payloads), 10_000):
            service.enqueue_many("bench", "fetch", payloads[start : start + 10_000])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        for _ in range(claims):
            began = time.perf_counter()
            got = service.claim(1)
            timings.append((time.perf_counter() - began) * 1000)
            if not got:
                empty += 1
            for job in got:
                service.store.complete([domain.patch(job.ref, Done(), SystemClock().now())])
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM job_rate_keys").fetchone()
            rate_rows = int(row[0]) if row else 0
    result = {**_percentiles(timings), "empty_claims": empty, "rate_key_rows": rate_rows}
    log(f"{name}: {result}")
    return result


def _markdown(result: Mapping[str, Any]) -> str:
    lines = [
        "# Rate limits per key: the claim's cost\n",
        f"{result['keys']:,} keys, {result['per_key']} queued jobs per key "
        f"({result['keys'] * result['per_key']:,} queued), {result['claims']:,} claims of one "
        "job per side through `JobService.claim` (fair order), each job finished outside the "
        f"timing. Command: `{result['command']}`.\n",
        "| side | p50 ms | p95 ms | max ms | empty claims | job_rate_keys rows |",
        "|---|---|---|---|---|---|",
    ]
    for name in SIDES:
        r = result["sides"][name]
        lines.append(
            f"| {name} | {r['p50_ms']} | {r['p95_ms']} | {r['max_ms']} | {r['empty_claims']} "
            f"| {r['rate_key_rows']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres", help="server URL"
    )
    parser.add_argument("--keys", type=int, default=1000, help="rate-limited keys (1,000)")
    parser.add_argument("--per-key", type=int, default=20, help="queued jobs per key (20)")
    parser.add_argument("--claims", type=int, default=2000, help="claims timed per side (2,000)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "keys": args.keys,
        "per_key": args.per_key,
        "claims": args.claims,
        "command": "uv run python -m bench.rate_limits " + " ".join(argv or sys.argv[1:]),
        "sides": {},
    }
    try:
        for name in SIDES:
            result["sides"][name] = side(args.pg_url, name, args.keys, args.per_key, args.claims)
    finally:
        drop_database(args.pg_url, DATABASE)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"rate-limits-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    path.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    path.with_suffix(".md").write_text(_markdown(result))
    log("wrote", path.with_suffix(".md"))
    print(_markdown(result))


if __name__ == "__main__":
    main()
