"""The web panel with many jobs: how long a person waits, with 100 jobs and with 10,000.

    uv run python -m bench.panel                 # 100 and 10,000 jobs, 3 rounds
    uv run python -m bench.panel --sizes 100,10000,50000 --rounds 5

One ``jobs api`` process on a fresh database (``--db``, dropped and created again), one org per
size whose jobs are all queued for tomorrow (no worker runs, so the list holds still), and
Debian's headless Chromium (``/usr/bin/chromium`` or ``--chromium``) driven by Playwright. Per
round and size, in a fresh browser profile: sign in through the sign-in page, then measure

- **first page**: from the navigation to ``/`` until the panel shows its first 50 rows and the
  badge's count (the session check, the stream's ``ready``, ``GET /job-types``,
  ``GET /jobs/stats`` and ``GET /jobs`` included);
- **next page**: from scrolling to the end of the table until 100 rows show (one keyset page);
- the DOM's element count and the page's JS heap after the two pages.

The sizes run alternated in every round, so a change of the machine's load hits both; the
result is the ratio 10,000 / 100 of the medians (1.0 = the panel does not slow down with the
org's size). Results: ``bench/results/raw/panel-<stamp>.{json,md}``. It never asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import wiring
from bench.common import drop_database, recreate_database

RESULTS = Path(__file__).parent / "results" / "raw"  # git-ignored; summaries: bench/results/*.md
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _fill(url: str, org: str, count: int) -> None:
    from jobs_core import NewJob
    from jobs_postgres.database import create_engine
    from jobs_postgres.store import PostgresJobStore

    engine = create_engine(url)
    try:
        store = PostgresJobStore(engine)
        now = datetime.now(UTC)
        later = now + timedelta(days=1)
        for start in range(0, count, 5000):
            size = min(5000, count - start)
            store.insert_many(
                [NewJob(org, "noop", {"n": n}, run_at=later) for n in range(start, start + size)],
                now,
            )
    finally:
        engine.dispose()


def _start_api(url: str, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBS_")}
    env.update(JOBS_DATABASE_URL=url, JOBS_DEMO_TYPES="1")
    jobs = Path(sys.executable).with_name("jobs")
    # The access log of every request would drown the figures.
    api = subprocess.Popen(
        [str(jobs), "api", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return api
        except OSError:
            time.sleep(0.2)
    api.kill()
    raise SystemExit("the API did not answer within 60 s")


def _measure(browser: Any, base: str, token: str) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{base}/signin")
        page.fill("#token", token)
        page.click("#signin-submit")
        page.wait_for_selector("body[data-ready='true']", timeout=60_000)
        began = time.perf_counter()
        page.goto(f"{base}/")
        page.wait_for_function(
            "() => document.querySelectorAll('#rows tr').length >= 50"
            " && document.querySelector('#count-queued').textContent !== '0'",
            timeout=60_000,
        )
        first = time.perf_counter() - began
        began = time.perf_counter()
        page.locator("#more").scroll_into_view_if_needed()
        page.wait_for_function(
            "() => document.querySelectorAll('#rows tr').length >= 100", timeout=60_000
        )
        following = time.perf_counter() - began
        elements = page.evaluate("document.getElementsByTagName('*').length")
        heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
        return {
            "first_page_ms": first * 1000,
            "next_page_ms": following * 1000,
            "elements": float(elements),
            "heap_mb": heap / 1e6,
        }
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; write the results; 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.panel", description=__doc__)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(
            "JOBS_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a server whose user may create databases",
    )
    parser.add_argument("--db", default="jobs_bench_panel", help="the database (re-created)")
    parser.add_argument("--sizes", default="100,10000", help="jobs in each org, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    from playwright.sync_api import sync_playwright

    url = recreate_database(args.pg_url, args.db)
    wiring.migrate(url)
    tokens = {}
    for size in sizes:
        org = f"panel-{size}"
        _fill(url, org, size)
        tokens[size] = wiring.issue_token(url, org)
        print(f"org {org}: {size:,} queued jobs", flush=True)
    port = _free_port()
    api = _start_api(url, port)
    rounds: list[dict[int, dict[str, float]]] = []
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            for number in range(1, args.rounds + 1):
                measured = {}
                order = sizes if number % 2 else list(reversed(sizes))
                for size in order:
                    measured[size] = _measure(browser, f"http://127.0.0.1:{port}", tokens[size])
                    figures = measured[size]
                    print(
                        f"round {number} {size:>7,} jobs: first page "
                        f"{figures['first_page_ms']:.0f} ms, next page "
                        f"{figures['next_page_ms']:.0f} ms, {figures['elements']:.0f} elements, "
                        f"{figures['heap_mb']:.1f} MB heap",
                        flush=True,
                    )
                rounds.append(measured)
            browser.close()
    finally:
        api.send_signal(signal.SIGTERM)
        api.wait(30)
        drop_database(args.pg_url, args.db)

    medians = {
        size: {key: statistics.median(r[size][key] for r in rounds) for key in rounds[0][size]}
        for size in sizes
    }
    small, large = sizes[0], sizes[-1]
    ratios = {
        key: medians[large][key] / medians[small][key] for key in ("first_page_ms", "next_page_ms")
    }
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    (RESULTS / f"panel-{stamp}.json").write_text(
        json.dumps(
            {"machine": machine, "rounds": rounds, "medians": medians, "ratios": ratios}, indent=2
        )
        + "\n"
    )
    lines = [
        f"# Panel with many jobs ({stamp}, {args.rounds} rounds, medians)",
        "",
        f"Machine: {machine}; API, PostgreSQL and Chromium on the same box.",
        "",
        "| jobs in the org | first page, ms | next page, ms | DOM elements | JS heap, MB |",
        "| --- | --- | --- | --- | --- |",
    ]
    for size in sizes:
        m = medians[size]
        lines.append(
            f"| {size:,} | {m['first_page_ms']:.0f} | {m['next_page_ms']:.0f} "
            f"| {m['elements']:.0f} | {m['heap_mb']:.1f} |"
        )
    lines += [
        "",
        f"{large:,} / {small:,}: first page {ratios['first_page_ms']:.2f}x, "
        f"next page {ratios['next_page_ms']:.2f}x (1.00 = no slower with the org's size).",
    ]
    (RESULTS / f"panel-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwritten: bench/results/raw/panel-{stamp}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
