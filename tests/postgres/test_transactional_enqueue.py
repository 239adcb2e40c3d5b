"""The public transactional enqueue (``jobs_postgres.enqueue``): a module's row and its job
commit together or not at all, on a Connection or a Session."""

from __future__ import annotations

import uuid

import pytest
from jobs_core import DedupScope, JobType, PayloadInvalid, Registry, Status, UnknownJobType
from jobs_postgres import enqueue, enqueue_many, jobs_in
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

pytestmark = pytest.mark.postgres

ORG = "acme"


@pytest.fixture
def module_registry() -> Registry:
    registry = Registry("module")
    registry.register(JobType("crawl_site", lambda ctx: None, dedup_scope=DedupScope.ACTIVE))
    return registry


def _count(engine: Engine, type_name: str = "crawl_site") -> int:
    with engine.connect() as conn:
        found: int = conn.execute(
            text("SELECT count(*) FROM jobs WHERE type = :t"), {"t": type_name}
        ).scalar_one()
    return found


def test_a_rolled_back_transaction_leaves_no_job(
    pg_engine: Engine, module_registry: Registry
) -> None:
    with pg_engine.connect() as conn, conn.begin() as transaction:
        enqueued = enqueue(conn, module_registry, ORG, "crawl_site", {"site": "a"})
        assert enqueued.created
        assert _count(pg_engine) == 0  # not visible before the caller commits
        transaction.rollback()
    assert _count(pg_engine) == 0

    with pg_engine.begin() as conn:
        enqueued = enqueue(conn, module_registry, ORG, "crawl_site", {"site": "a"}, priority=3)
    assert _count(pg_engine) == 1
    with pg_engine.connect() as conn:
        stored = jobs_in(conn, module_registry).get(ORG, enqueued.job.id)
    assert (stored.status, stored.priority, stored.payload) == (Status.QUEUED, 3, {"site": "a"})


def test_a_session_enqueues_in_its_transaction_and_dedup_holds(
    pg_engine: Engine, module_registry: Registry
) -> None:
    with Session(pg_engine) as session:
        first = enqueue(session, module_registry, ORG, "crawl_site", {}, dedup_key="site:a")
        again = enqueue(session, module_registry, ORG, "crawl_site", {}, dedup_key="site:a")
        assert (first.created, again.created, again.job.id) == (True, False, first.job.id)
        session.commit()
    assert _count(pg_engine) == 1
    with Session(pg_engine) as session:
        made = enqueue_many(session, module_registry, ORG, "crawl_site", [{"n": 1}, {"n": 2}])
        assert len(made) == 2
        session.rollback()
    assert _count(pg_engine) == 1


def test_a_refused_enqueue_raises_the_usual_errors(
    pg_engine: Engine, module_registry: Registry
) -> None:
    with pg_engine.begin() as conn:
        with pytest.raises(UnknownJobType):
            enqueue(conn, module_registry, ORG, "nope", {})
        with pytest.raises(PayloadInvalid):
            enqueue(conn, module_registry, ORG, "crawl_site", {"bad": "\x00"})
        with pytest.raises(TypeError, match="Connection or Session"):
            enqueue(pg_engine, module_registry, ORG, "crawl_site", {})  # type: ignore[arg-type]


def test_the_package_exports_its_store_and_wakeup(pg_engine: Engine) -> None:
    import jobs_postgres
    from jobs_postgres.store import PostgresJobStore as Home
    from jobs_postgres.wakeup import PostgresWakeup

    assert jobs_postgres.PostgresJobStore is Home
    assert jobs_postgres.PostgresWakeup is PostgresWakeup
    assert {"PostgresJobStore", "PostgresWakeup"} <= set(jobs_postgres.__all__)
    store = jobs_postgres.PostgresJobStore(pg_engine)
    assert store.get(ORG, uuid.uuid4()) is None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = jobs_postgres.Nope
