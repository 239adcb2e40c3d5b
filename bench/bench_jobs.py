"""The jobs adapter for the shared peer harness (``../shared/bench/peers/harness.py``).

The harness measures jobs and its peers (procrastinate, pgqueuer, oban) with the same code in
one run; this file only tells it how to reach jobs, through jobs' public entry points
(:mod:`bench.wiring`): the Alembic migrations, ``JobService.enqueue`` (one transaction each),
``JobService.enqueue_many`` (one ``insert_many`` call) and one real worker process
(``jobs_worker.main.run_worker``) whose no-op handler calls ``harness.record(key)`` first.

It is run by ``bench/peers.sh`` with the project's interpreter (``BENCH_ADAPTERS=bench
BENCH_PY_jobs=.venv/bin/python``); the harness puts its own folder on ``PYTHONPATH``. By hand::

    PYTHONPATH=../shared/bench/peers BENCH_WORKDIR=/tmp/bench_exec \\
        .venv/bin/python bench/bench_jobs.py

The harness's client side is asyncio; jobs' core is synchronous (decision 0001), so the enqueue
methods call the service directly: the harness awaits them one at a time, nothing else runs on
its loop. The handler is a plain function, jobs' natural handler form (slots are threads).
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

# The harness runs this file as a script from bench/; the project root makes ``bench.*``
# importable (the project's interpreter already has the jobs packages).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness  # type: ignore[import-not-found]
from jobs_core import JobService

from bench import wiring
from bench.common import (
    FAILED_SQL,
    NOOP,
    ORG,
    TOTAL_SQL,
    UNFINISHED_SQL,
    as_url,
    make_registry,
    payloads,
)

registry = make_registry(harness.record)
"""The benchmark's job type; its handler records the key through the harness."""


class JobsAdapter:
    """jobs, as the harness sees a system (see the harness README, "Adding a system")."""

    name = "jobs"
    # "default" is what a worker does without options: docs/contract.md §4 runs one job at a time
    # (JOBS_CONCURRENCY defaults to 1); "c10" is ten slots (`jobs worker --concurrency 10`);
    # "c10nosync" adds the opt-in `--no-synchronous-commit` (faster, not crash-proof: decision
    # 0006), reported apart like procrastinate's "c10pool12"; "c2p300" is two slots and a
    # prefetch of up to 300 jobs (`--concurrency 2 --prefetch 300`, docs/worker.md "Prefetch"):
    # fewer threads taking turns for the interpreter, larger batches per round trip.
    drain_configs: dict[str, dict[str, Any]] = {
        "default": {"concurrency": 1},
        "c10": {"concurrency": 10},
        "c10nosync": {"concurrency": 10, "synchronous_commit": False},
        "c2p300": {"concurrency": 2, "prefetch": 300},
    }
    unfinished_sql = UNFINISHED_SQL
    total_sql = TOTAL_SQL
    failed_sql = FAILED_SQL

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._service: JobService | None = None

    def versions(self) -> dict[str, str]:
        """The versions measured."""
        packages = ("jobs-core", "jobs-postgres", "jobs-worker", "sqlalchemy", "psycopg")
        return {p: version(p) for p in packages}

    async def setup(self, url: str) -> None:
        """Install the schema: the project's Alembic chain, as ``jobs migrate`` does."""
        wiring.migrate(as_url(url))

    async def open(self, url: str) -> None:
        """The client: a ``JobService`` over the PostgreSQL store."""
        self._service = self._stack.enter_context(wiring.service(as_url(url), registry))

    async def close(self) -> None:
        """Dispose of the client's engine."""
        self._stack.close()
        self._service = None

    def _svc(self) -> JobService:
        if self._service is None:
            raise RuntimeError("open() the adapter first")
        return self._service

    async def enqueue_one(self, key: object) -> None:
        """One job, one transaction."""
        self._svc().enqueue(ORG, NOOP, {"k": key})

    async def enqueue_bulk(self, keys: list[object]) -> None:
        """Every job in one ``insert_many`` round trip."""
        self._svc().enqueue_many(ORG, NOOP, payloads(keys))

    def worker_main(self, url: str, cfg_name: str, cfg: dict[str, Any]) -> None:
        """ONE real jobs worker with that concurrency until SIGTERM (a graceful stop)."""
        if "prefetch" in cfg:
            os.environ["JOBS_PREFETCH"] = str(cfg["prefetch"])
        code = wiring.run_worker(
            as_url(url),
            registry,
            int(cfg["concurrency"]),
            synchronous_commit=cfg.get("synchronous_commit"),
        )
        if code:
            raise SystemExit(code)


if __name__ == "__main__":
    # Import ourselves so the registry and handler live in module "bench_jobs", not "__main__"
    # (the harness's convention for every adapter).
    import bench_jobs  # type: ignore[import-not-found]

    harness.main(bench_jobs.JobsAdapter())
