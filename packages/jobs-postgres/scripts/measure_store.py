"""Figures for the PostgreSQL store (a quick measurement, not a test, not a benchmark suite).

    uv run python packages/jobs-postgres/scripts/measure_store.py [SERVER_URL]

Creates a scratch database on the server (default: the local one at 127.0.0.1:5432), migrates
it, measures bulk insert (jobs/s through one ``insert_many`` call) and the claim + complete
drain rate by batch size, then drops the database. Each figure is the best of three runs (the
machine is shared); the server's durable-commit rate is printed first, since every claim and
every finish is one commit.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import UTC, datetime

from jobs_core import Done, NewJob, domain
from jobs_postgres import migrations
from jobs_postgres.database import create_engine, drop_database, ensure_database, with_database
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text


def _reset(store: PostgresJobStore) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs, job_attempts, job_waits, job_wait_ends"))
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE jobs"))


def bulk_insert(store: PostgresJobStore, n: int) -> float:
    _reset(store)
    specs = [NewJob("org-bench", "noop", {"i": i}) for i in range(n)]
    started = time.perf_counter()
    jobs = store.insert_many(specs, datetime.now(UTC))
    elapsed = time.perf_counter() - started
    assert len(jobs) == n
    return n / elapsed


def drain(store: PostgresJobStore, n: int, batch: int, threads: int = 1) -> float:
    _reset(store)
    store.insert_many([NewJob("org-bench", "noop", {"i": i}) for i in range(n)], datetime.now(UTC))
    done = 0
    lock = threading.Lock()

    def run() -> None:
        nonlocal done
        while claimed := store.claim(batch, datetime.now(UTC), ["noop"]):
            now = datetime.now(UTC)
            finished = store.complete([domain.patch(j.ref, Done(), now) for j in claimed]).finished
            with lock:
                done += sum(1 for j in finished if j is not None)

    started = time.perf_counter()
    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    assert done == n, (done, n)
    return n / elapsed


def commit_rate(engine: Engine, n: int = 300) -> float:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS measure_commits (n int)"))
        started = time.perf_counter()
        for i in range(n):
            conn.execute(text("INSERT INTO measure_commits VALUES (:n)"), {"n": i})
        elapsed = time.perf_counter() - started
        conn.execute(text("DROP TABLE measure_commits"))
    return n / elapsed


def main() -> None:
    server = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
    name = f"jobs_pg_measure_{os.getpid()}"
    ensure_database(server, name)
    url = with_database(server, name)
    try:
        migrations.upgrade(url)
        engine = create_engine(url)
        store = PostgresJobStore(engine)
        with engine.connect() as conn:
            print(conn.execute(text("SELECT version()")).scalar_one().split(" on ")[0])
        print(f"durable commits: {commit_rate(engine):,.0f}/s (one-row INSERTs in autocommit)")
        for n in (1_000, 20_000, 50_000, 100_000):
            rate = max(bulk_insert(store, n) for _ in range(3))
            print(f"insert_many {n:>7,} jobs in one call: {rate:>9,.0f} jobs/s")
        for batch, threads, n in (
            (1, 1, 2_000),
            (10, 1, 10_000),
            (100, 1, 20_000),
            (100, 4, 20_000),
            (500, 1, 20_000),
        ):
            rate = max(drain(store, n, batch, threads) for _ in range(3))
            print(
                f"claim+complete, batch {batch:>3}, {threads} thread(s), {n:,} jobs: "
                f"{rate:>9,.0f} jobs/s"
            )
        engine.dispose()
    finally:
        drop_database(server, name)


if __name__ == "__main__":
    main()
