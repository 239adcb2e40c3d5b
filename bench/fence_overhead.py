"""What the self-fencing worker adds per job, in CPU time, measured apart from the drain (whose
rate on this shared 2-core box swings by 2-6x between rounds; decision 0010).

Per job the worker now also: tracks and untracks the job's lease in the fence
(``LeaseFence.track`` / ``stopped``) and, per store call, passes the watchdog's checkout and
checkin events (``jobs_postgres.deadlines.abort_stuck_calls``). This times both with
``time.process_time`` (CPU of this process, so other processes' load counts little), against a
pooled checkout/checkin without the watchdog, and writes ``bench/results/raw/fence-overhead.md``.

    uv run python -m bench.fence_overhead [--pg-url URL] [--n 20000]
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine

RESULTS = Path(__file__).parent / "results" / "raw"  # git-ignored; summaries: bench/results/*.md


def _per_call_us(run: Callable[[], None], n: int) -> float:
    best = float("inf")
    for _ in range(5):
        began = time.process_time()
        for _ in range(n):
            run()
        best = min(best, (time.process_time() - began) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()

    from jobs_postgres.database import create_engine
    from jobs_postgres.deadlines import abort_stuck_calls
    from jobs_worker.fence import LeaseFence

    fence = LeaseFence(600.0, 60.0, lambda reason: None)
    fence.start()
    ids = [uuid.uuid4() for _ in range(args.n)]
    cursor = iter(ids * 5)

    def lease() -> None:
        job_id = next(cursor)
        fence.track(job_id, time.monotonic(), lambda reason: None)
        fence.stopped(job_id)

    fence_us = _per_call_us(lease, args.n)
    fence.close()

    plain = create_engine(args.pg_url, pool_size=1)
    watched = create_engine(args.pg_url, pool_size=1)
    abort_stuck_calls(watched, 10.0)

    def checkout(engine: Engine) -> Callable[[], None]:
        def run() -> None:
            conn = engine.raw_connection()
            conn.close()

        return run

    checkout(plain)()
    checkout(watched)()
    plain_us = _per_call_us(checkout(plain), args.n)
    watched_us = _per_call_us(checkout(watched), args.n)
    plain.dispose()
    watched.dispose()

    lines = [
        "# Self-fencing worker: CPU added per job (`python -m bench.fence_overhead`)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; n = {args.n}, best of 5, CPU time"
        " of this process (`time.process_time`); 2 shared cores, contended by other work.",
        "",
        "| what | µs per call |",
        "|---|---|",
        f"| fence: track + stopped (once per job) | {fence_us:.2f} |",
        f"| pool checkout + checkin, plain | {plain_us:.2f} |",
        f"| pool checkout + checkin, with the watchdog's events | {watched_us:.2f} |",
        f"| watchdog's share (once per store call) | {watched_us - plain_us:.2f} |",
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "fence-overhead.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
