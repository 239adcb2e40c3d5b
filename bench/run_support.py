"""Helpers of :mod:`bench.run`: the ratios of a round, the finished history it inserts, a free
port, the API's health, the summary of the rounds."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

from bench import httpload
from bench.common import (
    NOOP,
    median,
)
from bench.run_options import (
    DRAIN_CONFIGS,
    BenchFailure,
)


def ratios(res: dict[str, Any]) -> dict[str, float | None]:
    """Ratios measured inside one round (far less noisy than ratios of medians)."""
    out: dict[str, float | None] = {}

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    single = (res.get("enqueue_single") or {}).get("jps")
    bulk = (res.get("enqueue_bulk") or {}).get("jps")
    out["bulk_over_single"] = ratio(bulk, single)
    drain = res.get("drain") or {}
    jps = {name: (d or {}).get("jps") for name, d in drain.items()}
    out["c10_over_default"] = ratio(jps.get("c10"), jps.get("default"))
    for cfg in DRAIN_CONFIGS:
        out[f"history_over_empty_{cfg}"] = ratio(jps.get(f"{cfg}_history"), jps.get(cfg))
    return out


def insert_history(url: str, rows: int) -> None:
    """``rows`` finished jobs of another org in one ``generate_series`` statement, then
    ``VACUUM ANALYZE``: the state of a table that has lived (autovacuum would have visited it).

    Mostly ``done``, one in 50 ``failed``; times spread over the past 30 days.
    """
    statement = """
        INSERT INTO jobs (id, org_id, type, status, attempts, max_attempts, dedup_scope, payload,
                          report, error, created_at, run_at, started_at, finished_at)
        SELECT uuidv7(), 'history', %(type)s,
               CASE WHEN i %% 50 = 0 THEN 'failed' ELSE 'done' END,
               1, 3, 'queue', jsonb_build_object('k', -i),
               NULL, CASE WHEN i %% 50 = 0 THEN 'RuntimeError: boom' END,
               t, t, t + interval '1 second', t + interval '2 seconds'
        FROM (
            SELECT i, now() - interval '30 days' + (i * interval '30 days' / %(rows)s) AS t
            FROM generate_series(1, %(rows)s) AS i
        ) AS h
    """
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, {"type": NOOP, "rows": rows})
        conn.execute("VACUUM ANALYZE jobs")


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(port: int, proc: subprocess.Popen[bytes], log_file: Path) -> None:
    """Wait until ``GET /healthz`` answers 200 (60 s at most)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise BenchFailure(f"api: server exited rc={proc.returncode}\n{log_file.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise BenchFailure("api: /healthz never answered 200 within 60 s")


async def probe_api(port: int, headers: dict[str, str], path: str) -> int:
    conn = httpload.Connection("127.0.0.1", port, headers)
    try:
        return await conn.get(path)
    finally:
        await conn.close()


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds of every numeric figure, by the same key paths."""

    def walk(docs: list[Any]) -> Any:
        first = next((d for d in docs if d is not None), None)
        if isinstance(first, dict):
            keys: list[str] = []
            for d in docs:
                for k in d or {}:
                    if k not in keys:
                        keys.append(k)
            return {k: walk([(d or {}).get(k) for d in docs]) for k in keys}
        if isinstance(first, bool) or not isinstance(first, int | float):
            return first
        return median(docs)

    return dict(walk(rounds))
