"""What the jobs benchmarks share: the no-op job type, the execution record, database helpers.

A benchmark job carries one key in its payload (``{"k": ...}``); its handler does nothing but
append ``"<key> <unix time>"`` to a record file, one ``O_APPEND`` write per job (atomic across the
worker's slot threads). That file is what "executed" means: counting its lines tells when every
job ran, its keys tell duplicates and missing jobs, its times give the enqueue → start latency.
"""

from __future__ import annotations

import compileall
import os
import statistics
import sysconfig
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import psycopg
from jobs_core import JobContext, Registry
from psycopg import conninfo, sql

ORG = "bench"
"""The org every benchmark job belongs to."""

NOOP = "bench.noop"
"""The job type of the benchmarks: records its key, does nothing else."""

EXEC_FILE_ENV = "JOBS_BENCH_EXEC_FILE"
"""The environment variable naming the record file of a worker process."""

UNFINISHED_SQL = "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')"
TOTAL_SQL = "SELECT count(*) FROM jobs"
FAILED_SQL = f"SELECT count(*) FROM jobs WHERE status = 'failed' AND org_id = '{ORG}'"


class ExecRecorder:
    """Appends ``"<key> <time>"`` lines to the file named by :data:`EXEC_FILE_ENV`."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __call__(self, key: object) -> None:
        """Record that the job with ``key`` starts now (call it first thing in the handler)."""
        started = time.time()
        fd = self._fd
        if fd is None or self._pid != os.getpid():
            with self._lock:
                if self._fd is None or self._pid != os.getpid():
                    path = os.environ[EXEC_FILE_ENV]
                    self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    self._pid = os.getpid()
                fd = self._fd
        assert fd is not None
        os.write(fd, f"{key} {started:.6f}\n".encode())


def make_registry(record: Callable[[Any], None]) -> Registry:
    """A registry with the one no-op type, whose handler calls ``record(key)``.

    The handler is a plain function: the natural form of a jobs handler (decision 0001, slots are
    threads), run on the slot thread with no event loop in between.
    """
    registry = Registry("bench")

    def noop(ctx: JobContext) -> None:
        record(ctx.payload["k"])

    registry.job_type(NOOP, max_attempts=3)(noop)
    return registry


def payloads(keys: Iterable[object]) -> list[dict[str, Any]]:
    """One payload per key."""
    return [{"k": key} for key in keys]


def compile_bytecode(root: Path) -> None:
    """Byte-compile the virtualenv and the project's sources, as a deployment does.

    uv installs without ``.pyc`` files unless told to (pip compiles at install), and with
    ``PYTHONDONTWRITEBYTECODE`` set nothing is cached at run time either: every worker process
    the benchmark spawns would then compile SQLAlchemy, pydantic and the rest from source, about
    a second of CPU per start that no production install pays. Quick when already compiled.
    """
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    paths |= {str(root / part) for part in ("packages", "apps", "bench")}
    for path in sorted(paths):
        if os.path.isdir(path):
            compileall.compile_dir(path, quiet=1, workers=0)


# ---- record files ------------------------------------------------------------------------------


class RecordTail:
    """Counts the lines of a record file as it grows, reading only what was appended."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self.lines = 0

    def poll(self) -> int:
        """The number of complete lines written so far."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.lines
        complete = chunk.rfind(b"\n") + 1
        self._offset += complete
        self.lines += chunk.count(b"\n", 0, complete)
        return self.lines


def read_records(path: str) -> list[tuple[str, float]]:
    """``(key, start time)`` for every execution in a record file (empty if there is none)."""
    out: list[tuple[str, float]] = []
    try:
        with open(path) as f:
            for line in f:
                key, _, started = line.strip().partition(" ")
                if started:
                    out.append((key, float(started)))
    except FileNotFoundError:
        pass
    return out


def exactly_once(records: list[tuple[str, float]], expected: set[str]) -> dict[str, int]:
    """Duplicates (extra runs of a key), missing keys and unexpected keys of one phase."""
    runs = Counter(key for key, _ in records)
    return {
        "executions": sum(runs.values()),
        "duplicates": sum(n - 1 for key, n in runs.items() if n > 1 and key in expected),
        "missing": len(expected - runs.keys()),
        "unexpected": sum(n for key, n in runs.items() if key not in expected),
    }


# ---- statistics ----------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float | None:
    """The ``p``-th percentile with linear interpolation between ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Iterable[float | int | None]) -> float | None:
    """The median of the values that are numbers, None if there are none."""
    numbers = [v for v in values if isinstance(v, int | float)]
    return statistics.median(numbers) if numbers else None


def rounded(value: float | None, digits: int = 1) -> float | None:
    """``round`` that lets None through."""
    return None if value is None else round(value, digits)


def latency_summary(latencies_ms: list[float]) -> dict[str, float | None]:
    """p50/p95/p99/max of a list of milliseconds."""
    return {
        "p50_ms": rounded(percentile(latencies_ms, 50), 2),
        "p95_ms": rounded(percentile(latencies_ms, 95), 2),
        "p99_ms": rounded(percentile(latencies_ms, 99), 2),
        "max_ms": rounded(max(latencies_ms), 2) if latencies_ms else None,
    }


# ---- databases -----------------------------------------------------------------------------------


def database_url(server_url: str, dbname: str) -> str:
    """``server_url`` pointed at the database ``dbname``."""
    params = conninfo.conninfo_to_dict(server_url)
    params["dbname"] = dbname
    return conninfo.make_conninfo("", **params)


def as_url(conninfo_or_url: str) -> str:
    """A ``postgresql://`` URL (SQLAlchemy and the jobs settings want one, not key=value)."""
    if conninfo_or_url.startswith(("postgresql://", "postgres://")):
        return conninfo_or_url
    from sqlalchemy.engine import URL

    p = conninfo.conninfo_to_dict(conninfo_or_url)
    host = str(p.get("host", "127.0.0.1"))
    socket_dir = host.startswith("/")  # a unix socket (the embedded server): ?host=<dir>
    return URL.create(
        "postgresql",
        username=str(p.get("user", "postgres")),
        password=str(p["password"]) if p.get("password") else None,
        host=None if socket_dir else host,
        port=int(str(p.get("port") or 5432)),
        database=str(p["dbname"]),
        query={"host": host} if socket_dir else {},
    ).render_as_string(hide_password=False)


def recreate_database(server_url: str, dbname: str, template: str | None = None) -> str:
    """Drop (forcibly) and create ``dbname``, as a copy of ``template`` if given; its URL.

    Every phase starts from a fresh database, so none sees another's rows, bloat or cached
    plans; a template copies a prepared database file by file (seconds for a million rows).
    """
    with psycopg.connect(server_url, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        if template is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
        else:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(name, sql.Identifier(template))
            )
    return as_url(database_url(server_url, dbname))


def drop_database(server_url: str, dbname: str) -> None:
    """Drop ``dbname`` if it exists."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def scalar(url: str, query: str) -> Any:
    """The first column of the first row of ``query``."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
        return row[0] if row else None


def server_facts(server_url: str) -> Mapping[str, Any]:
    """The PostgreSQL version and the settings that matter most to these figures."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        facts: dict[str, Any] = {}
        for setting in ("server_version", "shared_buffers", "synchronous_commit", "fsync"):
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
            facts[setting] = row[0] if row else None
        return facts
