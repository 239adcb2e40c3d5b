"""``python -m bench.flow limits`` and ``fair``: the limited drain, the claim's latency under
limits, and the fairness bound between orgs with the fair claim's cost."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

import psycopg
from jobs_core import Done, JobType, Registry, SystemClock, domain

from bench import wiring
from bench.common import recreate_database, scalar
from bench.flow import ROOT, STARTED, UNFINISHED, log, noop, registry, write

#: every database ``limits`` and ``fair`` create; ``main`` drops them when the command ends
DATABASES = ("bench_flow_limits", "bench_flow_latency", "bench_flow_fair", "bench_flow_fairness")

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
    write(args.out, "limits", result, _limits_markdown(result))


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

    # a type without limits: the fair order's own cost, apart from the limits
    plain_types = Registry("bench-fair")
    plain_types.register(JobType("plain_noop", noop))
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
        args.out,
        "fair",
        result,
        f"# Fairness between orgs ({args.queued:,} queued jobs of org A)\n\n{lines}\n\n"
        "Claims are counted, not timed (the bound does not depend on the machine); the\n"
        "latencies are of one process on a shared 2-core machine.\n",
    )
