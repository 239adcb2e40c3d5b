"""``jobs doctor``'s facts on a real PostgreSQL: queue depth per type, and a session left idle in
a transaction named with its advice."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from jobs_postgres.health import LONG_TRANSACTION, examine
from sqlalchemy import text

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = pytest.mark.postgres


def test_queue_depth_and_an_idle_transaction_holding_vacuum_back(
    sched_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sched_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (org_id, type, created_at) SELECT 'o', 't' || (g % 2), "
                "now() - interval '1 hour' FROM generate_series(1, 5) g"
            )
        )
    # A session idle in a transaction that has a snapshot: what holds vacuum back.
    holder = sched_engine.connect()
    try:
        # (SQLAlchemy begins the transaction with the first statement.)
        holder.execute(text("SET application_name = 'doctor-test-holder'"))
        holder.execute(text("SELECT txid_current()"))  # it holds a transaction id now
        monkeypatch.setattr("jobs_postgres.health.LONG_TRANSACTION", LONG_TRANSACTION * 0)
        health = examine(sched_engine)
    finally:
        holder.rollback()
        holder.close()
    assert [(t, d) for t, d, _ in health.queue] == [("t1", 3), ("t0", 2)]
    queue = [f for f in health.findings if f.subject == "queue t0"]
    assert queue[0].level == "warn"  # waiting an hour: the advice says to start workers
    assert "start workers" in queue[0].advice
    held = [f for f in health.findings if "doctor-test-holder" in f.fact]
    assert held, health.findings
    assert held[0].level == "bad"
    assert "idle in transaction" in held[0].fact
    assert "pg_terminate_backend" in held[0].advice
    assert health.to_dict()["table"]["n_live_tup"] is not None
