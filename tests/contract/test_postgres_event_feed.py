"""The PostgreSQL event feed beyond the contract suite: what only a server with concurrent
transactions can show (the contract of the feed itself is ``jobs_contract.events``)."""

from __future__ import annotations

from typing import Any

import pytest
from jobs_contract.events import ORG, everything
from jobs_contract.helpers import service_for
from jobs_core import FakeClock


@pytest.mark.postgres
def test_the_present_is_a_snapshot_not_a_position(pg_engine: Any) -> None:
    """A transaction that got its id first but commits after the present writes *below* a
    change that committed before it: no single position separates them, the present does."""
    from jobs_postgres.events import PostgresEventFeed
    from jobs_postgres.store import PostgresJobStore
    from sqlalchemy import text

    feed = PostgresEventFeed(pg_engine)
    service = service_for(PostgresJobStore(pg_engine), FakeClock())
    try:
        start = feed.head()
        with pg_engine.connect() as slow:
            slow.execute(text("SELECT pg_current_xact_id()"))  # its id, before the other's
            early = service.enqueue(ORG, "reconcile").job  # a later id, committed now
            present = feed.present()
            slow.execute(
                text("UPDATE jobs SET payload = '{\"late\": true}' WHERE id = :id"),
                {"id": early.id},
            )
            slow.commit()
        enqueued, updated = (
            next(e for e in everything(feed, start) if e.kind.value == kind)
            for kind in ("enqueued", "updated")
        )
        assert updated.position < enqueued.position  # id order is not commit order
        assert enqueued.position > present.cursor  # a position alone would deliver it
        assert present.committed(enqueued.position)
        assert not present.committed(updated.position)
    finally:
        feed.close()
