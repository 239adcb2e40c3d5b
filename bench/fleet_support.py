"""What :mod:`bench.fleet` measures besides the drain itself: the store calls' latency inside
each worker process, the server's connections and wait events sampled during a drain, and the
top statements of ``pg_stat_statements``."""

from __future__ import annotations

import atexit
import functools
import itertools
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

TIMINGS_ENV = "JOBS_BENCH_TIMINGS_FILE"
"""Where a fleet worker process writes its store calls' durations when it exits."""

TIMED_CALLS = ("claim", "complete")
"""The store calls timed in the workers: the claim, and the finish (with the next claim when
the worker asks for one: ``complete(..., claim_next=...)``)."""


def time_store_calls() -> None:
    """Wrap ``PostgresJobStore.claim`` and ``.complete`` of this process to record how long
    each call takes (milliseconds), written to ``$JOBS_BENCH_TIMINGS_FILE`` as JSON at exit.
    Only :mod:`bench.fleet`'s worker processes call this: the product is untouched."""
    from jobs_postgres.store import PostgresJobStore

    path = os.environ.get(TIMINGS_ENV)
    if not path:
        return
    durations: dict[str, list[float]] = {name: [] for name in TIMED_CALLS}
    lock = threading.Lock()

    def timed(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent = (time.perf_counter() - began) * 1000
                with lock:
                    durations[name].append(spent)

        return wrapper

    for name in TIMED_CALLS:
        setattr(PostgresJobStore, name, timed(name, getattr(PostgresJobStore, name)))

    def write() -> None:
        with lock:
            Path(path).write_text(json.dumps(durations))

    atexit.register(write)


def read_timings(paths: list[Path]) -> dict[str, list[float]]:
    """The durations of every worker's timings file, per call."""
    merged: dict[str, list[float]] = {name: [] for name in TIMED_CALLS}
    for path in paths:
        if path.exists():
            for name, values in json.loads(path.read_text()).items():
                merged.setdefault(name, []).extend(values)
    return merged


_ACTIVITY = """
SELECT count(*) AS connections,
       count(*) FILTER (WHERE query NOT ILIKE 'LISTEN%%') AS without_listen,
       count(*) FILTER (WHERE state = 'active') AS active
FROM pg_stat_activity WHERE datname = %(db)s AND pid <> pg_backend_pid()
"""

_WAITS = """
SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'running'), count(*)
FROM pg_stat_activity
WHERE datname = %(db)s AND state = 'active' AND pid <> pg_backend_pid()
GROUP BY 1, 2
"""


class Sampler:
    """Samples ``pg_stat_activity`` of one database every ``every_s`` on a thread of its own
    (a direct connection): the peak of server connections (all, and without the workers' idle
    ``LISTEN`` connections) and how often each wait event was seen on an active backend."""

    def __init__(self, admin_url: str, database: str, every_s: float = 0.1) -> None:
        self._url = admin_url
        self._db = database
        self._every_s = every_s
        self._stop = threading.Event()
        self.peak = {"connections": 0, "without_listen": 0, "active": 0}
        self.waits: Counter[str] = Counter()
        self.samples = 0
        self._thread = threading.Thread(target=self._run, name="fleet-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute(_ACTIVITY, {"db": self._db}).fetchone()
                if row is not None:
                    for key, value in zip(self.peak, row, strict=True):
                        self.peak[key] = max(self.peak[key], int(value))
                for kind, event, count in conn.execute(_WAITS, {"db": self._db}).fetchall():
                    self.waits[f"{kind}:{event}"] += int(count)
                self.samples += 1
                self._stop.wait(self._every_s)

    def wait_events(self, top: int = 8) -> list[dict[str, Any]]:
        """The most seen wait events, with their share of the active-backend samples."""
        total = sum(self.waits.values()) or 1
        return [
            {"event": name, "samples": n, "share": round(n / total, 3)}
            for name, n in self.waits.most_common(top)
        ]


_TOP = """
SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3),
       rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 160)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %(db)s)
ORDER BY total_exec_time DESC
LIMIT %(top)s
"""


def reset_statements(admin_url: str) -> None:
    """Forget ``pg_stat_statements``' figures (before a drain)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


def top_statements(admin_url: str, database: str, top: int = 8) -> list[dict[str, Any]]:
    """The statements of ``database`` that took the most server time since the reset."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(_TOP, {"db": database, "top": top}).fetchall()
    return [
        {
            "calls": int(calls),
            "total_ms": float(total),
            "mean_ms": float(mean),
            "rows": int(count),
            "query": query,
        }
        for calls, total, mean, count, query in rows
    ]


def ceiling(steps: list[dict[str, Any]], gain: float = 0.1) -> int | None:
    """The worker count past which adding workers stops helping: the first step whose next
    step's drain rate is less than ``gain`` (10 %) higher. None if every step still helped."""
    ordered = sorted(steps, key=lambda step: step["workers"])
    for here, there in itertools.pairwise(ordered):
        if there["jobs_per_s"] < here["jobs_per_s"] * (1 + gain):
            return int(here["workers"])
    return None
