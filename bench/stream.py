"""The event stream benchmark: many SSE clients on one API process while jobs drain.

    uv run python -m bench.stream                          # 1,000 clients, 10,000 jobs, 2 rounds
    uv run python -m bench.stream --clients 200 --n 2000   # smaller
    uv run python -m bench.stream --tiny                   # seconds: proves it runs

Each round runs three drains of ``--n`` no-op jobs by one worker process with 10 slots (the
``c10`` drain of ``bench.run``), each in a fresh database, in this order:

- **off**: no event row written: the log's triggers disabled (``ALTER TABLE jobs DISABLE
  TRIGGER USER``) and a worker whose claims and finishes log nothing (``bench/nolog.py``: the
  same statements with their log CTE emptied); what the drain costs without the event
  machinery, on this tree;
- **on**: the triggers on and one API process running its event hub (no client): the cost of
  the machinery itself (the 5 % budget of decision 0013);
- **clients**: the same, with ``--clients`` streams open on the API (spread over ``--orgs``
  orgs, as many clients per org; the jobs are spread over the same orgs, so each change reaches
  ``clients / orgs`` streams). Every client counts its events and the delay from the change's
  ``at`` (written by the database in the changing transaction) to its arrival: the delivery
  latency p50/p99. The API's RSS (peak) and CPU time are read from ``/proc``.

The clients run in this process on one asyncio loop (raw sockets, minimal parsing), on the same
2-core box as PostgreSQL, the worker and the API: every figure is contended. Ratios within a
round are the comparison; ``bench/results/raw/stream-<stamp>.{json,md}`` hold every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import nolog, wiring
from bench.common import (
    NOOP,
    drop_database,
    latency_summary,
    payloads,
    recreate_database,
    rounded,
    scalar,
)
from bench.run import Bench
from bench.run_options import ROOT, parse
from bench.run_support import free_port, wait_healthy

RESULTS = ROOT / "bench" / "results" / "raw"  # git-ignored; summaries: bench/results/*.md


def log(*parts: object) -> None:
    """Progress on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, file=sys.stderr, flush=True)


# ---- the clients -----------------------------------------------------------------------------


class Clients:
    """``count`` SSE connections on an asyncio loop of their own thread."""

    def __init__(self, port: int, tokens: list[str], count: int) -> None:
        self.port = port
        self.tokens = tokens
        self.count = count
        self.ready = 0
        self.events = 0
        self.resyncs = 0
        self.failed = 0
        self.latencies_ms: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, timeout_s: float = 300) -> None:
        """Open every connection; return when each has its ``ready`` event."""
        self._thread.start()
        for i in range(self.count):
            token = self.tokens[i % len(self.tokens)]
            asyncio.run_coroutine_threadsafe(self._spawn(token), self._loop).result()
        deadline = time.time() + timeout_s
        while self.ready + self.failed < self.count and time.time() < deadline:
            time.sleep(0.1)
        if self.failed:
            log(f"{self.failed} stream(s) failed to open")

    async def _spawn(self, token: str) -> None:
        self._tasks.append(asyncio.create_task(self._client(token)))

    async def _client(self, token: str) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            self.failed += 1
            return
        writer.write(
            (
                f"GET /jobs/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
            ).encode()
        )
        buffer = b""
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    return
                now = time.time()
                buffer += chunk
                *frames, buffer = buffer.split(b"\n\n")
                for frame in frames:
                    if b"event: job" in frame:
                        self.events += 1
                        start = frame.find(b'"at":"') + 6
                        at = frame[start : frame.find(b'"', start)].decode()
                        stamp = datetime.fromisoformat(at).timestamp()
                        self.latencies_ms.append((now - stamp) * 1000)
                    elif b"event: ready" in frame:
                        self.ready += 1
                    elif b"event: resync" in frame:
                        self.resyncs += 1
        except (OSError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    def stop(self) -> None:
        """Close every connection and the loop."""

        async def cancel() -> None:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel(), self._loop).result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


# ---- the API process -------------------------------------------------------------------------


def _proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Api:
    """One ``python -m jobs_api`` process on ``url``, sampled for RSS while it runs."""

    def __init__(self, url: str, log_file: Path) -> None:
        self.port = free_port()
        env = dict(os.environ, JOBS_DATABASE_URL=url, JOBS_STORE="postgres")
        self._log = open(log_file, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobs_api", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_healthy(self.port, self.proc, log_file)
        self.peak_rss_mb = _proc_rss_mb(self.proc.pid)
        self._sampling = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._sampling.wait(0.25):
            try:
                self.peak_rss_mb = max(self.peak_rss_mb, _proc_rss_mb(self.proc.pid))
            except OSError:
                return

    def rss_mb(self) -> float:
        """The resident set size now."""
        return _proc_rss_mb(self.proc.pid)

    def cpu_s(self) -> float:
        """User + system CPU seconds so far."""
        return _proc_cpu_s(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM and wait."""
        self._sampling.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


# ---- the phases ------------------------------------------------------------------------------


def fill(url: str, bench: Bench, n: int, orgs: list[str]) -> None:
    """``n`` queued no-op jobs with keys 0..n-1, spread evenly over ``orgs``."""
    with wiring.service(url, bench.registry) as service:
        per = -(-n // len(orgs))
        for i, org in enumerate(orgs):
            keys = range(i * per, min(n, (i + 1) * per))
            if keys:
                service.enqueue_many(org, NOOP, payloads(keys))


def drain_phase(bench: Bench, mode: str, n: int, orgs: list[str], clients: int) -> dict[str, Any]:
    """One c10 drain in a fresh database, with the event machinery ``off``, ``on`` (an API
    and its hub, no client) or with ``clients`` streams."""
    url = recreate_database(bench.o.pg_url, bench.o.db)
    wiring.migrate(url)
    out: dict[str, Any] = {"mode": mode}
    api: Api | None = None
    streams: Clients | None = None
    try:
        if mode == "off":
            nolog.disable_triggers(url)
            os.environ[nolog.NO_LOG_ENV] = "1"  # the worker's claims and finishes log nothing
        else:
            tokens = [wiring.issue_token(url, org) for org in orgs]
            api = Api(url, bench.path(f"stream-api-{mode}.log"))
            if mode == "clients":
                streams = Clients(api.port, tokens, clients)
                began = time.time()
                streams.start()
                out["connect_s"] = rounded(time.time() - began, 2)
                out["clients_ready"] = streams.ready
            out["rss_before_mb"] = rounded(api.rss_mb())
            cpu_before = api.cpu_s()
        fill(url, bench, n, orgs)
        drained = bench.timed_drain(url, "c10", f"stream-{mode}")
        out.update(jps=drained.get("jps"), wall_s=drained.get("wall_s"))
        # what the drain logged: none with the machinery off, a claim and a finish per job on
        out["events_logged"] = scalar(url, "SELECT count(*) FROM job_events")
        if (out["events_logged"] == 0) != (mode == "off"):
            bench.errors.append(f"stream-{mode}: {out['events_logged']} event rows logged")
        out["exactly_once"] = not (
            drained["duplicates"] or drained["missing"] or drained["unexpected"]
        )
        if api is not None:
            if streams is not None:
                expected = 3 * n * clients // len(orgs)  # enqueued, claimed, done
                deadline = time.time() + 120
                while streams.events < expected and time.time() < deadline:
                    time.sleep(0.2)
                out.update(
                    events_expected=expected,
                    events_received=streams.events,
                    resyncs=streams.resyncs,
                    **{f"latency_{k}": v for k, v in latency_summary(streams.latencies_ms).items()},
                )
            out["api_cpu_s"] = rounded(api.cpu_s() - cpu_before, 2)
            out["api_rss_peak_mb"] = rounded(api.peak_rss_mb)
    finally:
        os.environ.pop(nolog.NO_LOG_ENV, None)
        if streams is not None:
            streams.stop()
        if api is not None:
            api.stop()
    log(f"{mode}: {json.dumps(out)}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and write the results files."""
    p = argparse.ArgumentParser(prog="python -m bench.stream", description=__doc__.split("\n")[0])
    p.add_argument("--pg-url", default=None, help="as bench.run (env JOBS_BENCH_PG_URL)")
    p.add_argument("--n", type=int, default=10_000, help="jobs per drain")
    p.add_argument("--clients", type=int, default=1000, help="concurrent stream clients")
    p.add_argument("--orgs", type=int, default=100, help="orgs the jobs and clients spread over")
    p.add_argument("--rounds", type=int, default=2, help="rounds of off / on / clients")
    p.add_argument("--db", default="jobs_bench_stream", help="database re-created per drain")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--tiny", action="store_true", help="seconds: proves it runs")
    a = p.parse_args(argv)
    if a.tiny:
        a.n, a.clients, a.orgs, a.rounds = 300, 20, 4, 1
    base = ["--n", str(a.n), "--settle-s", "0.5", "--db", a.db]
    if a.pg_url:
        base += ["--pg-url", a.pg_url]
    bench = Bench(parse(base))
    orgs = [f"org-{i:03d}" for i in range(a.orgs)]
    rounds = []
    try:
        for number in range(1, a.rounds + 1):
            log(f"round {number}/{a.rounds}")
            rounds.append(
                {
                    mode: drain_phase(bench, mode, a.n, orgs, a.clients)
                    for mode in ("off", "on", "clients")
                }
            )
    finally:
        drop_database(bench.o.pg_url, bench.o.db)  # re-created per drain, dropped at the end
    summary: dict[str, Any] = {}
    for mode in ("off", "on", "clients"):
        summary[mode] = {
            key: rounded(statistics.median(r[mode][key] for r in rounds), 2)
            for key in rounds[0][mode]
            if isinstance(rounds[0][mode][key], int | float)
            and not isinstance(rounds[0][mode][key], bool)
            and all(r[mode].get(key) is not None for r in rounds)
        }
    for mode in ("on", "clients"):
        # the ratio of each round's drains (adjacent in time: a drift of the machine's speed
        # cancels), then the median over rounds
        each = [
            r[mode]["jps"] / r["off"]["jps"]
            for r in rounds
            if r[mode].get("jps") and r["off"].get("jps")
        ]
        summary[mode]["jps_over_off"] = rounded(statistics.median(each), 3) if each else None
        summary[mode]["jps_over_off_rounds"] = [rounded(x, 3) for x in each]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    a.out.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python -m bench.stream " + " ".join(argv or sys.argv[1:]),
        "n": a.n,
        "clients": a.clients,
        "orgs": a.orgs,
        "rounds": rounds,
        "median": summary,
        "errors": bench.errors,
        "cpus": os.cpu_count(),
    }
    (a.out / f"stream-{stamp}.json").write_text(json.dumps(doc, indent=2))
    lines = [
        f"# Stream benchmark {stamp}",
        "",
        f"`{doc['command']}`: {a.n:,} no-op jobs drained by one c10 worker; {a.clients:,} SSE "
        f"clients over {a.orgs} orgs; {a.rounds} round(s), medians (the ratio to off: the median "
        f"of each round's ratio, its drains being adjacent in time); {os.cpu_count()} CPUs "
        "shared by PostgreSQL, the worker, the API and the clients (contended box).",
        "",
        "| mode | drain jobs/s | ratio to off | latency p50 ms | p99 ms | API CPU s | API RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in ("off", "on", "clients"):
        m = summary[mode]
        lines.append(
            f"| {mode} | {m.get('jps')} | {m.get('jps_over_off', 1.0)} | "
            f"{m.get('latency_p50_ms', '')} | {m.get('latency_p99_ms', '')} | "
            f"{m.get('api_cpu_s', '')} | {m.get('api_rss_peak_mb', '')} |"
        )
    clients = summary["clients"]
    lines += [
        "",
        f"Events received {clients.get('events_received')} of {clients.get('events_expected')}"
        f"; resyncs {clients.get('resyncs')}; errors {bench.errors or 'none'}.",
    ]
    (a.out / f"stream-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
