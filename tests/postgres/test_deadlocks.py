"""Zero deadlocks under concurrent batched writes on real PostgreSQL (issue 22).

Workers that finish batches of jobs and claim the next ones, a monitor per worker that
heartbeats the jobs its worker holds (another connection, another order), a sweeper that reads
every running job as stale and writes sweep patches in batches (the fenced finish of
``complete``), an end-hook runner and an operator cancelling and retrying, all at once for a few
seconds, each thread on connections of its own. Every multi-row write on ``jobs`` must take its
row locks in one order (ascending id) and the sweep must never wait on a finish, so the server
never reports SQLSTATE 40P01 (``deadlock detected``): the test fails on the first one.

``deadlock_timeout`` is lowered for these sessions so the server checks for a cycle after 20 ms of
waiting instead of a second: more interleavings are tried per second, none is excused.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from jobs_core import Done, Failed, NewJob, domain
from jobs_core.domain import Job, Requeue
from jobs_core.flow import ClaimLimits, FlowLimit
from jobs_core.ports import ClaimNext
from jobs_postgres.database import STORE_SESSION_SETTINGS, create_engine
from jobs_postgres.store import PostgresJobStore
from sqlalchemy import Engine, text

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SECONDS = 8.0
WORKERS = 4
BATCH = 12
JOBS = 600
TYPES = ["deadlock_a", "deadlock_b"]
DEADLOCK = "40P01"


def _sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of ``error`` or of an error in its chain (the store wraps driver errors)."""
    seen: BaseException | None = error
    while seen is not None:
        state = getattr(seen, "sqlstate", None) or getattr(
            getattr(seen, "orig", None), "sqlstate", None
        )
        if state is not None:
            return str(state)
        seen = seen.__cause__ or seen.__context__
    return None


class Harness:
    """The threads of the run and what they saw."""

    def __init__(self, store: PostgresJobStore) -> None:
        self.store = store
        self.stop = threading.Event()
        self.deadlocks: list[str] = []
        self.errors: list[str] = []
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def loop(self, name: str, step: Callable[[random.Random], None]) -> threading.Thread:
        rng = random.Random(name)

        def run() -> None:
            while not self.stop.is_set():
                try:
                    step(rng)
                except Exception as error:  # every error is recorded, the deadlocks apart
                    with self._lock:
                        if _sqlstate(error) == DEADLOCK:
                            self.deadlocks.append(f"{name}: {error}")
                        else:
                            self.errors.append(f"{name}: {error!r}")
                    continue
                with self._lock:
                    self.counts[name] = self.counts.get(name, 0) + 1

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread


class Worker:
    """A worker's jobs: finishes and claims them in batches (its completer) while its monitor
    heartbeats all it holds, in another order, on another connection."""

    def __init__(self, harness: Harness, limits: ClaimLimits | None) -> None:
        self.h = harness
        self.limits = limits
        self.held: dict[uuid.UUID, Job] = {}
        self.lock = threading.Lock()

    def complete(self, rng: random.Random) -> None:
        with self.lock:
            held = list(self.held.values())
        rng.shuffle(held)  # outcomes arrive in the order the slots end: any order
        ending = held[: rng.randint(0, len(held))]
        now = self.h.now()
        patches = [domain.patch(job.ref, _outcome(rng, now), now) for job in ending]
        done = self.h.store.complete(
            patches,
            claim_next=ClaimNext(BATCH - len(held) + len(ending), now, TYPES, self.limits),
        )
        with self.lock:
            for job in ending:
                self.held.pop(job.id, None)
            for job in done.claimed:
                self.held[job.id] = job

    def heartbeat(self, rng: random.Random) -> None:
        with self.lock:
            refs = [job.ref for job in self.held.values()]
        rng.shuffle(refs)
        lost = {ref.job_id for ref in refs} - self.h.store.heartbeat(refs, self.h.now())
        with self.lock:
            for job_id in lost:
                self.held.pop(job_id, None)


def _outcome(rng: random.Random, now: datetime) -> Done | Failed | Requeue:
    roll = rng.random()
    if roll < 0.7:  # the jobs keep coming back: the run never runs dry
        return Requeue(run_at=now, refund_attempt=True)
    if roll < 0.85:
        return Done({"ok": True})
    return Failed("boom")


def _sweep(h: Harness, rng: random.Random) -> None:
    """Every running job read as stale, swept in batches in the order found (a sweeper that
    batches its writes), a single one now and then (the service's sweep)."""
    now = h.now()
    stale = h.store.find_stale(now + timedelta(hours=1), 100)
    size = rng.choice([1, 8, 32])
    for start in range(0, len(stale), size):
        part = stale[start : start + size]
        h.store.complete([domain.sweep_patch(job, now) for job in part])


def _hooks(h: Harness, rng: random.Random) -> None:
    now = h.now()
    taken = h.store.take_end_hooks(TYPES, 50, now + timedelta(hours=1), now + timedelta(hours=2))
    rng.shuffle(taken)
    h.store.end_hooks_done(taken)


def _operator(h: Harness, ids: list[uuid.UUID], rng: random.Random) -> None:
    job_id = rng.choice(ids)
    job = h.store.get("org", job_id)
    if job is None:
        return
    if job.status in (domain.Status.QUEUED, domain.Status.RUNNING):
        h.store.cancel("org", job_id, h.now())
    elif job.status in (domain.Status.FAILED, domain.Status.CANCELLED):
        h.store.retry("org", job_id, h.now())
    else:
        h.store.insert(NewJob(org_id="org", type=rng.choice(TYPES), payload={}), h.now())


def _engine(pg_url: str) -> Engine:
    settings = {**STORE_SESSION_SETTINGS, "deadlock_timeout": "20ms", "lock_timeout": "20s"}
    return create_engine(pg_url, session_settings=settings, pool_size=4 * WORKERS + 6)


# Under limits the finish and the claim are one transaction that also takes advisory locks (the
# limited type's; the other type's jobs are claimed by the first statement).
LIMITED: ClaimLimits = {TYPES[0]: FlowLimit(type_limit=3 * WORKERS)}


@pytest.mark.parametrize("limits", [None, LIMITED], ids=["plain", "limited"])
def test_concurrent_batched_finishes_claims_heartbeats_and_sweeps_never_deadlock(
    pg_engine: Engine, pg_url: str, limits: ClaimLimits | None
) -> None:
    engine = _engine(pg_url)
    try:
        store = PostgresJobStore(engine)
        now = datetime.now(UTC)
        jobs = store.insert_many(
            [NewJob(org_id="org", type=TYPES[i % 2], payload={"i": i}) for i in range(JOBS)], now
        )
        h = Harness(store)
        workers = [Worker(h, limits) for _ in range(WORKERS)]
        threads = []
        for n, worker in enumerate(workers):
            threads.append(h.loop(f"complete-{n}", worker.complete))
            threads.append(h.loop(f"heartbeat-{n}", worker.heartbeat))
        threads.append(h.loop("sweep", lambda rng: _sweep(h, rng)))
        threads.append(h.loop("hooks", lambda rng: _hooks(h, rng)))
        ids = [job.id for job in jobs]
        threads.append(h.loop("operator", lambda rng: _operator(h, ids, rng)))
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline and not h.deadlocks:
            time.sleep(0.05)
        h.stop.set()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
        assert not h.deadlocks, h.deadlocks[:3]
        # the run did the work it claims to: every kind of thread wrote many times
        assert all(h.counts.get(t.name, 0) >= 5 for t in threads), h.counts
        assert not [
            e for e in h.errors if "InvalidTransition" not in e and "DedupConflict" not in e
        ], h.errors[:5]
    finally:
        engine.dispose()


def test_batches_of_the_same_keys_in_opposite_orders_never_deadlock(pg_url: str) -> None:
    """Two enqueues of one batch of keyed jobs each, the same keys in opposite orders, at once
    (rounds of fresh keys): each waits for the other's uncommitted key it meets, so batches that
    insert in input order lock the keys in opposite orders. The batch inserts in key order."""
    engine = _engine(pg_url)
    try:
        store = PostgresJobStore(engine)
        now = datetime.now(UTC)
        org = f"keys-{uuid.uuid4()}"
        errors: list[BaseException] = []
        for round_ in range(15):
            keys = [f"r{round_}-k{i:04d}" for i in range(300)]
            batches = [keys, keys[::-1]]
            barrier = threading.Barrier(len(batches))

            def enqueue(batch: list[str], barrier: threading.Barrier) -> None:
                barrier.wait()
                try:
                    store.insert_many(
                        [NewJob(org_id=org, type=TYPES[0], payload={}, dedup_key=k) for k in batch],
                        now,
                    )
                except BaseException as error:  # recorded for the assertion below
                    errors.append(error)

            threads = [threading.Thread(target=enqueue, args=(b, barrier)) for b in batches]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
        assert not [e for e in errors if _sqlstate(e) == DEADLOCK], errors[:2]
        assert not errors, errors[:2]
        with engine.connect() as conn:
            count = conn.execute(
                text("SELECT count(*) FROM jobs WHERE org_id = :org"), {"org": org}
            ).scalar()
        assert count == 15 * 300  # each key once: the second batch's copy was a duplicate
    finally:
        engine.dispose()
