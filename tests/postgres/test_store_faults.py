"""What only PostgreSQL can show, under races and faults: claimers on separate connections and
processes never take a job twice, the dedup race's fallback, an enqueue waiting on a key holder's
transaction; connections terminated, lost mid-call or never made. The store's other PostgreSQL
behaviour is in ``test_store.py``, the shared behaviour in the contract suite."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections import Counter
from typing import Any

import psycopg
import pytest
from jobs_contract.helpers import finish
from jobs_core import (
    Done,
    FakeClock,
    Job,
    JobService,
    NewJob,
    Registry,
    Status,
    StoreUnavailable,
)
from jobs_postgres.database import create_engine, libpq_url
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

from tests.postgres.proxy import CuttingProxy
from tests.postgres.store_kit import ORG, enqueue_n

pytestmark = pytest.mark.postgres


# -- concurrency -------------------------------------------------------------------------------


def test_claimers_on_separate_connections_never_take_a_job_twice(
    pg_store: PostgresJobStore, pg_url: str, clock: FakeClock
) -> None:
    """Spec 000 §5 with real connections: each thread has its own engine (its own session)."""
    total = 2_000
    enqueue_n(pg_store, total, clock.now())
    taken: list[uuid.UUID] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def claimer() -> None:
        engine = create_engine(pg_url, pool_size=1)
        store = PostgresJobStore(engine)
        try:
            start.wait()
            while batch := store.claim(10, clock.now()):
                with lock:
                    taken.extend(j.id for j in batch)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [job_id for job_id, n in Counter(taken).items() if n > 1] == []
    assert len(taken) == total
    assert pg_store.stats(ORG)[Status.RUNNING] == total


CLAIMER = """
import json, sys
from datetime import datetime
from jobs_core import Done, domain
from jobs_postgres.database import create_engine
from jobs_postgres.store import COPY_FROM, PostgresJobStore
from jobs_postgres.wakeup import PostgresWakeup

url, now = sys.argv[1], datetime.fromisoformat(sys.argv[2])
engine = create_engine(url, pool_size=1)
store = PostgresJobStore(engine)
print("ready", flush=True)
sys.stdin.readline()  # start together
mine = []
while batch := store.claim(5, now):
    mine.extend(str(j.id) for j in batch)
    store.complete([domain.patch(j.ref, Done(), now) for j in batch])
engine.dispose()
print(json.dumps(mine), flush=True)
"""


@pytest.mark.slow
def test_claimers_in_separate_processes_never_take_a_job_twice(
    pg_store: PostgresJobStore, pg_url: str, clock: FakeClock
) -> None:
    total = 1_000
    enqueue_n(pg_store, total, clock.now())
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, pg_url, clock.now().isoformat()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    taken: list[str] = []
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            out, _ = worker.communicate(timeout=120)
            assert worker.returncode == 0
            taken.extend(json.loads(out))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert len(taken) == total
    assert len(set(taken)) == total
    assert pg_store.stats(ORG)[Status.DONE] == total


def test_race_fallback_when_the_winner_finishes_in_another_session(
    pg_store: PostgresJobStore, pg_url: str, registry: Registry, clock: FakeClock
) -> None:
    """Spec 000 §5: the winner ends (releasing its key) between the conflict and the re-read,
    in another worker's session; the enqueue inserts again instead of failing."""
    service = JobService(pg_store, registry, clock)
    winner = service.enqueue(ORG, "crawl", dedup_key="crawl:site-9").job
    other_engine = create_engine(pg_url, pool_size=1)
    other_worker = PostgresJobStore(other_engine)

    class WinnerEndsBeforeReread(PostgresJobStore):
        rereads = 0

        def find_by_dedup_key(self, org_id: str, dedup_key: str) -> Job | None:
            type(self).rereads += 1
            if type(self).rereads == 1:
                [running] = other_worker.claim(1, clock.now())
                finish(other_worker, running.ref, Done(), clock.now())
            return super().find_by_dedup_key(org_id, dedup_key)

    try:
        racing = service.using(WinnerEndsBeforeReread(pg_store.engine))
        result = racing.enqueue(ORG, "crawl", dedup_key="crawl:site-9")
    finally:
        other_engine.dispose()
    assert WinnerEndsBeforeReread.rereads == 1
    assert result.created
    assert result.job.id != winner.id
    assert result.job.dedup_key == "crawl:site-9"
    assert service.get(ORG, winner.id).status is Status.DONE


def test_a_concurrent_enqueue_waits_for_the_key_holders_transaction(
    pg_store: PostgresJobStore, pg_engine: Engine, registry: Registry, clock: FakeClock
) -> None:
    """Two enqueues of one key at once, the first inside an open transaction: the second
    returns the first's job once it commits, never a second job."""
    service = JobService(pg_store, registry, clock)
    result: list[Any] = []
    with pg_engine.connect() as conn, conn.begin():
        first = service.using(pg_store.bound_to(conn)).enqueue(ORG, "crawl", dedup_key="k")
        thread = threading.Thread(
            target=lambda: result.append(service.enqueue(ORG, "crawl", dedup_key="k"))
        )
        thread.start()
        thread.join(timeout=0.5)
        assert thread.is_alive()  # blocked on the uncommitted key
    thread.join(timeout=30)
    [second] = result
    assert not second.created
    assert second.job.id == first.job.id


# -- lost connections ---------------------------------------------------------------------------


def _terminate_other_sessions(pg_url: str) -> int:
    """Terminate every other session of the database and wait (5 s at most) until they are gone."""
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchone()
        return int(killed[0]) if killed else 0


def _failures(call: Any) -> int:
    """How many StoreUnavailable ``call`` raises before it works (3 tries)."""
    for failures in range(3):
        try:
            call()
            return failures
        except StoreUnavailable:
            pass
    raise AssertionError("still unavailable after 3 tries")


@pytest.mark.parametrize("check_connections", [True, False])
def test_the_store_survives_its_connections_being_terminated(
    pg_url: str, pg_engine: Engine, clock: FakeClock, check_connections: bool
) -> None:
    """Nothing is lost when the server drops every session between two calls. With the default
    engine (pooled connections checked at checkout) the next call just works, whatever it is.
    Without the check, reads and single enqueues still work (retried once on a fresh
    connection); any other call raises StoreUnavailable once and the one after works."""
    engine = create_engine(pg_url, pool_size=4, check_connections=check_connections)
    store = PostgresJobStore(engine)
    try:
        enqueue_n(store, 10, clock.now())
        assert len(store.claim(3, clock.now())) == 3  # warm the pool
        assert _terminate_other_sessions(pg_url) >= 1
        assert _failures(lambda: store.stats(ORG)) == 0
        stats = store.stats(ORG)
        assert stats[Status.QUEUED] == 7
        assert stats[Status.RUNNING] == 3

        assert _terminate_other_sessions(pg_url) >= 1
        assert _failures(lambda: store.insert(NewJob(ORG, "reconcile"), clock.now())) == 0
        assert store.stats(ORG)[Status.QUEUED] == 8  # inserted once

        assert _terminate_other_sessions(pg_url) >= 1
        assert _failures(lambda: store.claim(10, clock.now())) == (0 if check_connections else 1)
        assert store.stats(ORG)[Status.RUNNING] == 11
    finally:
        engine.dispose()


@pytest.mark.parametrize("committed", [False, True])
def test_an_insert_whose_connection_is_lost_is_retried_once_and_never_doubled(
    pg_url: str, pg_engine: Engine, clock: FakeClock, committed: bool
) -> None:
    """The connection is lost under the INSERT, before the server saw it or after it committed
    (only its answer lost): the store tries again on a fresh connection, which looks for the
    job's id first, and the job exists once."""
    proxy = CuttingProxy(pg_url, b"WITH inserted AS", after_reply=committed)
    engine = create_engine(proxy.url, pool_size=2)
    store = PostgresJobStore(engine)
    try:
        job = store.insert(NewJob(ORG, "reconcile", {"n": 1}), clock.now())
        assert proxy.cut.is_set()
        assert job is not None
        with pg_engine.connect() as conn:
            rows = conn.execute(text("SELECT id, payload FROM jobs")).all()
        assert [tuple(row) for row in rows] == [(job.id, {"n": 1})]
    finally:
        engine.dispose()
        proxy.close()


def test_a_lost_connection_in_a_callers_transaction_is_store_unavailable(
    pg_url: str, clock: FakeClock
) -> None:
    engine = create_engine(pg_url, pool_size=1)
    store = PostgresJobStore(engine)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            _terminate_other_sessions(pg_url)
            with pytest.raises(StoreUnavailable, match="unavailable"):
                store.bound_to(conn).insert(NewJob(ORG, "reconcile"), clock.now())
    finally:
        engine.dispose()


def test_an_unreachable_server_is_store_unavailable(clock: FakeClock) -> None:
    engine = create_engine(
        "postgresql://nobody@127.0.0.1:1/none", connect_args={"connect_timeout": 2}
    )
    try:
        with pytest.raises(StoreUnavailable):
            PostgresJobStore(engine).claim(1, clock.now())
    finally:
        engine.dispose()
