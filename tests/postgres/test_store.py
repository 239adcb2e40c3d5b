"""What only PostgreSQL can show: real concurrency, statements per call, the query plan, NOTIFY,
transactions of the caller, driver errors. The shared behaviour is the contract suite's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from jobs_contract.helpers import finish, finish_many
from jobs_core import (
    DedupConflict,
    DedupScope,
    Done,
    FakeClock,
    JobService,
    JobStore,
    NewJob,
    PayloadInvalid,
    Registry,
    Requeue,
    Status,
    Wakeup,
    domain,
)
from jobs_core.ports import ClaimNext
from jobs_postgres.database import libpq_url
from jobs_postgres.store import COPY_FROM, PostgresJobStore
from jobs_postgres.wakeup import PostgresWakeup
from sqlalchemy import Engine, text

from tests.postgres.store_kit import ORG, DriverStatementCounter, StatementCounter, enqueue_n

pytestmark = pytest.mark.postgres


def test_the_adapters_implement_the_ports(pg_store: PostgresJobStore, pg_url: str) -> None:
    """The structural typing is checked by mypy; the behaviour through the port types here: a
    job inserted through ``JobStore`` wakes a ``Wakeup`` listener and is claimed through it."""
    store: JobStore = pg_store
    wakeup: Wakeup = PostgresWakeup(pg_url)
    try:
        now = datetime.now(UTC)
        assert wakeup.wait(0) is False
        assert store.claim(1, now) == []
        inserted = store.insert(NewJob(ORG, "reconcile", {"n": 1}), now)
        assert inserted is not None
        assert wakeup.wait(5) is True
        [claimed] = store.claim(1, now)
        assert (claimed.id, claimed.status, claimed.attempts) == (inserted.id, Status.RUNNING, 1)
    finally:
        wakeup.close()


# -- one statement per hot call ---------------------------------------------------------------


def test_batch_claim_and_batch_finish_are_one_statement_each(
    pg_store: PostgresJobStore, pg_engine: Engine, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a batch without keys goes by COPY straight into jobs, see the COPY tests)
    with StatementCounter(pg_engine) as counter:
        jobs = pg_store.insert_many(
            [NewJob(ORG, "reconcile", {"i": i}, dedup_key=f"k{i}") for i in range(200)],
            clock.now(),
        )
    assert len(counter.statements) == 1
    assert len(jobs) == 200
    assert [j.payload["i"] for j in jobs] == list(range(200))  # input order

    with monkeypatch.context() as patch:
        driver = DriverStatementCounter(patch)
        claimed = pg_store.claim(50, clock.now())
    assert len(driver.statements) == 1
    assert len(claimed) == 50
    assert claimed == sorted(claimed, key=lambda j: (j.created_at, j.id))

    outcomes = [(job.ref, Done({"n": n})) for n, job in enumerate(claimed)]
    with monkeypatch.context() as patch:
        driver = DriverStatementCounter(patch)
        finished = finish_many(pg_store, outcomes[:40], clock.now())
    assert len(driver.statements) == 1
    assert [j.id if j else None for j in finished] == [j.id for j in claimed[:40]]
    assert [j.report for j in finished if j] == [{"n": n} for n in range(40)]

    # A slot whose job ended while work waits: its outcome and its next claim together.
    with monkeypatch.context() as patch:
        driver = DriverStatementCounter(patch)
        patches = [domain.patch(ref, outcome, clock.now()) for ref, outcome in outcomes[40:]]
        finished, more = pg_store.complete(patches, claim_next=ClaimNext(100, clock.now()))
    assert len(driver.statements) == 1
    assert [j.id if j else None for j in finished] == [j.id for j in claimed[40:]]
    assert [j.status for j in finished if j] == [Status.DONE] * 10
    assert len(more) == 100
    assert more == sorted(more, key=lambda j: (j.created_at, j.id))
    assert {j.status for j in more} == {Status.RUNNING}

    # A single insert runs on the psycopg connection itself, out of SQLAlchemy's sight, except
    # on a caller's connection: the same statement, one per insert.
    with pg_engine.begin() as conn, StatementCounter(pg_engine) as counter:
        bound = pg_store.bound_to(conn)
        assert bound.insert(NewJob(ORG, "reconcile", dedup_key="k"), clock.now()) is not None
        assert bound.insert(NewJob(ORG, "reconcile", dedup_key="k"), clock.now()) is None
    assert len(counter.statements) == 2


def test_finish_many_applies_the_first_of_two_outcomes_for_one_attempt(
    pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    enqueue_n(pg_store, 1, clock.now())
    [job] = pg_store.claim(1, clock.now())
    results = finish_many(
        pg_store, [(job.ref, Requeue(run_at=clock.now())), (job.ref, Done())], clock.now()
    )
    assert results[0] is not None
    assert results[0].status is Status.QUEUED
    assert results[1] is None


def test_bulk_insert_of_twenty_thousand_jobs_in_one_call(
    pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    specs = [NewJob(ORG, "reconcile", {"i": i}, dedup_key=f"k{i % 19_000}") for i in range(20_000)]
    jobs = pg_store.insert_many(specs, clock.now())
    # within the batch the first job with a key takes it; the 1,000 repeats are skipped
    assert len(jobs) == 19_000
    assert [j.payload["i"] for j in jobs] == list(range(19_000))
    assert pg_store.stats(ORG)[Status.QUEUED] == 19_000
    assert pg_store.find_by_dedup_key(ORG, "k5") == jobs[5]


def test_documents_a_handler_returns_are_stored_even_when_json_cannot_hold_them(
    pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    enqueue_n(pg_store, 1, clock.now())
    [job] = pg_store.claim(1, clock.now())
    done = finish(pg_store, job.ref, Done({"at": clock.now()}), clock.now())
    assert done is not None
    # decision 0019: a datetime is stored as its ISO 8601 text (it was str() before), and a
    # payload value JSON cannot hold is PayloadInvalid naming the field (it was a TypeError)
    assert done.report == {"at": clock.now().isoformat()}
    with pytest.raises(PayloadInvalid, match="cannot be stored as JSON"):
        pg_store.insert(NewJob(ORG, "reconcile", {"at": {clock.now()}}), clock.now())


# -- the caller's transaction ----------------------------------------------------------------


@pytest.fixture
def domain_table(pg_engine: Engine) -> Iterator[str]:
    """A table standing for a module's domain rows."""
    with pg_engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS pg_test_imports (id int PRIMARY KEY)"))
        conn.execute(text("TRUNCATE pg_test_imports"))
    yield "pg_test_imports"
    with pg_engine.begin() as conn:
        conn.execute(text("DROP TABLE pg_test_imports"))


def test_enqueue_in_the_callers_transaction_rolls_back_with_it(
    pg_store: PostgresJobStore,
    pg_engine: Engine,
    registry: Registry,
    clock: FakeClock,
    domain_table: str,
) -> None:
    service = JobService(pg_store, registry, clock)
    with pg_engine.connect() as conn:
        with conn.begin() as transaction:
            conn.execute(text(f"INSERT INTO {domain_table} VALUES (1)"))
            job = service.using(pg_store.bound_to(conn)).enqueue(ORG, "reconcile").job
            assert pg_store.bound_to(conn).get(ORG, job.id) == job  # visible inside
            assert pg_store.get(ORG, job.id) is None  # not outside, before the commit
            transaction.rollback()
        assert pg_store.get(ORG, job.id) is None
        assert conn.execute(text(f"SELECT count(*) FROM {domain_table}")).scalar_one() == 0
        conn.rollback()

        with conn.begin():
            conn.execute(text(f"INSERT INTO {domain_table} VALUES (2)"))
            kept = service.using(pg_store.bound_to(conn)).enqueue(ORG, "reconcile").job
    assert pg_store.get(ORG, kept.id) == kept


def test_a_large_batch_sent_with_copy_rolls_back_with_the_callers_transaction(
    pg_store: PostgresJobStore, pg_engine: Engine, clock: FakeClock
) -> None:
    specs = [NewJob(ORG, "reconcile", {"i": i}) for i in range(COPY_FROM + 10)]
    with pg_engine.connect() as conn, conn.begin() as transaction:
        bound = pg_store.bound_to(conn)
        assert len(bound.insert_many(specs, clock.now())) == len(specs)
        assert len(bound.insert_many(specs[:COPY_FROM], clock.now())) == COPY_FROM
        transaction.rollback()
    assert pg_store.stats(ORG)[Status.QUEUED] == 0
    jobs = pg_store.insert_many(specs, clock.now())
    # one instant for the whole batch, ids ascending in input order: it runs in input order
    assert [j.id for j in pg_store.claim(3, clock.now())] == [j.id for j in jobs[:3]]
    assert pg_store.get(ORG, jobs[-1].id) == jobs[-1]


def test_a_refused_retry_leaves_the_callers_transaction_usable(
    pg_store: PostgresJobStore,
    pg_engine: Engine,
    registry: Registry,
    clock: FakeClock,
    domain_table: str,
) -> None:
    service = JobService(pg_store, registry, clock)
    first = service.enqueue(ORG, "crawl", dedup_key="k").job
    service.cancel(ORG, first.id)
    service.enqueue(ORG, "crawl", dedup_key="k")  # holds the key now
    with pg_engine.connect() as conn, conn.begin():
        conn.execute(text(f"INSERT INTO {domain_table} VALUES (1)"))
        with pytest.raises(DedupConflict):
            pg_store.bound_to(conn).retry(ORG, first.id, clock.now())
        conn.execute(text(f"INSERT INTO {domain_table} VALUES (2)"))
    with pg_engine.connect() as conn:
        assert conn.execute(text(f"SELECT count(*) FROM {domain_table}")).scalar_one() == 2


# -- NOTIFY -----------------------------------------------------------------------------------


@pytest.fixture
def listener(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A raw connection listening on the wake-up channel, and on ``jobs_events``, which the
    store no longer notifies (a NOTIFY serialises commits; the event log is polled)."""
    conn = psycopg.connect(libpq_url(pg_url), autocommit=True)
    conn.execute("LISTEN jobs_new")
    conn.execute("LISTEN jobs_events")
    yield conn
    conn.close()


def _received(conn: psycopg.Connection[Any], timeout: float = 0.3) -> list[tuple[str, str]]:
    return [(n.channel, n.payload) for n in conn.notifies(timeout=timeout)]


def test_enqueue_notifies_on_commit_once_per_statement(
    pg_store: PostgresJobStore,
    pg_engine: Engine,
    listener: psycopg.Connection[Any],
    clock: FakeClock,
) -> None:
    with pg_engine.connect() as conn, conn.begin():
        job = pg_store.bound_to(conn).insert(NewJob(ORG, "reconcile"), clock.now())
        assert job is not None
        assert _received(listener) == []  # nothing before the commit
    assert _received(listener) == [("jobs_new", "")]

    enqueue_n(pg_store, 500, clock.now())
    assert _received(listener) == [("jobs_new", "")]  # one per statement, however many rows

    # COPY sizes: without keys (straight into jobs), with keys (through a temporary table)
    for key in (None, "k"):
        specs = [
            NewJob(org, "reconcile", {"i": i}, dedup_key=key and f"{key}{i}")
            for i in range(COPY_FROM // 2)
            for org in ("b", "a")
        ]
        assert len(pg_store.insert_many(specs, clock.now())) == COPY_FROM
        assert _received(listener) == [("jobs_new", "")]

    assert pg_store.insert(NewJob(ORG, "reconcile", dedup_key="x"), clock.now()) is not None
    _received(listener)
    assert pg_store.insert(NewJob(ORG, "reconcile", dedup_key="x"), clock.now()) is None
    assert _received(listener) == []  # a deduplicated enqueue wakes nobody


def test_requeue_and_retry_wake_workers_and_ends_notify_nothing(
    pg_store: PostgresJobStore, listener: psycopg.Connection[Any], clock: FakeClock
) -> None:
    enqueue_n(pg_store, 2, clock.now())
    a, b = pg_store.claim(2, clock.now())
    _received(listener)
    finish_many(pg_store, [(a.ref, Requeue(run_at=clock.now())), (b.ref, Done())], clock.now())
    assert _received(listener) == [("jobs_new", "")]  # the re-queue: work to run

    [again] = pg_store.claim(1, clock.now())
    assert _received(listener) == []  # a claim notifies nothing
    finish(pg_store, again.ref, Done(), clock.now())
    assert _received(listener) == []  # done: nothing new to run, and no commit lock taken

    cancelled = pg_store.insert(NewJob(ORG, "reconcile"), clock.now())
    assert cancelled is not None
    pg_store.cancel(ORG, cancelled.id, clock.now())
    _received(listener)
    pg_store.retry(ORG, cancelled.id, clock.now())
    assert _received(listener) == [("jobs_new", "")]


# -- the query plan ---------------------------------------------------------------------------


def test_the_claim_uses_the_partial_queue_index_on_a_table_with_history(
    pg_store: PostgresJobStore, pg_engine: Engine, clock: FakeClock
) -> None:
    with pg_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (org_id, type, status, created_at, run_at, started_at,"
                " finished_at, attempts)"
                " SELECT 'org-' || (i % 50), 'reconcile', 'done', :then, :then, :then, :then, 1"
                " FROM generate_series(1, 30000) AS i"
            ),
            {"then": clock.now() - timedelta(days=1)},
        )
    enqueue_n(pg_store, 20, clock.now())
    with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE jobs"))
        for statement, params in [
            (pg_store_claim_sql(None), {"now": clock.now(), "limit": 10}),
            (pg_store_claim_sql(["reconcile"]), {"now": clock.now(), "limit": 10}),
        ]:
            plan = conn.execute(text(f"EXPLAIN (FORMAT JSON) {statement}"), params).scalar_one()
            scans = _scans(plan[0]["Plan"])
            assert ("Index Scan", "jobs_queue_idx", "jobs") in scans, scans
            # the one sequential scan: the paused types (job_type_pauses, a few rows at most,
            # read once per statement into the array the walk filters on)
            assert [s for s in scans if s[0] == "Seq Scan"] == [
                ("Seq Scan", None, "job_type_pauses")
            ], scans
    assert len(pg_store.claim(10, clock.now())) == 10


def pg_store_claim_sql(types: list[str] | None) -> str:
    """The claim statement's text, with the types bound inline for EXPLAIN (SQLAlchemy syntax
    for the other parameters)."""
    from jobs_core.claims import ClaimPlan
    from jobs_postgres import claims

    (statement,) = claims.statements(ClaimPlan.of(10, datetime.now(UTC), types))
    if types is not None:
        statement = statement.replace(
            "CAST(%(types)s AS text[])", "ARRAY[" + ", ".join(f"'{t}'" for t in types) + "]"
        )
    return re.sub(r"%\((\w+)\)s", r":\1", statement)


def _scans(node: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    found = []
    if "Scan" in node["Node Type"]:
        found.append((node["Node Type"], node.get("Index Name"), node.get("Relation Name")))
    for child in node.get("Plans", []):
        found.extend(_scans(child))
    return found


# -- staleness --------------------------------------------------------------------------------


def test_a_malformed_heartbeat_falls_back_to_the_start_time(
    pg_store: PostgresJobStore, pg_engine: Engine, clock: FakeClock
) -> None:
    enqueue_n(pg_store, 1, clock.now())
    [job] = pg_store.claim(1, clock.now())
    with pg_engine.begin() as conn:
        conn.execute(
            text('UPDATE jobs SET progress = \'{"updated_at": "yesterday"}\' WHERE id = :id'),
            {"id": job.id},
        )
    later = clock.now() + timedelta(seconds=601)
    stale_before = later - timedelta(seconds=600)
    [stale] = pg_store.find_stale(stale_before, 10)
    assert stale.last_seen_at == job.started_at
    sweep = domain.patch(stale.ref, Requeue(run_at=later), later, seen_at=stale.heartbeat_at)
    [swept] = pg_store.complete([sweep]).finished
    assert swept is not None
    assert swept.status is Status.QUEUED


# -- time comes from the caller -------------------------------------------------------------


def test_every_instant_is_the_callers_not_the_servers(
    pg_store: PostgresJobStore, clock: FakeClock
) -> None:
    clock.set(datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC))
    job = pg_store.insert(
        NewJob(ORG, "crawl", dedup_scope=DedupScope.ACTIVE, dedup_key="k"), clock.now()
    )
    assert job is not None
    assert job.created_at == clock.now()
    clock.advance(1)
    [running] = pg_store.claim(1, clock.now())
    assert running.started_at == clock.now()
    clock.advance(1)
    done = finish(pg_store, running.ref, Done(), clock.now())
    assert done is not None
    assert done.finished_at == clock.now()
