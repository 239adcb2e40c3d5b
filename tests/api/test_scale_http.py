"""The API on real HTTP past one connection per client (decision 0040): through PgBouncer in
transaction mode, and reading from a real streaming standby the session makes (its replay paused
to make it lag). Read-your-writes, the reads of other orgs from the standby, and the event
stream's resume under lag: no event lost, none twice, none out of order. Skipped, with the
reason, without pgbouncer or PostgreSQL's server binaries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_events_http import ORG_A, ORG_B, World
from tests.pooling import TABLES, Standby
from tests.worker.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.mark.pooler
def test_the_api_and_its_event_stream_through_the_pooler(
    pooled_url: str, pooled_engine: Any
) -> None:
    world = World(pooled_url, pooled_engine)
    try:
        api = world.start(JOBS_DATABASE_POOLER="transaction")
        stream = world.stream(api, world.token_a)
        stream.until("ready")
        with world.http(api, world.token_a) as http:
            first = http.post("/jobs", json={"type": "noop"}).json()["id"]
            seen = stream.jobs(1)[0]
            stream.close()
            missed = [http.post("/jobs", json={"type": "noop"}).json()["id"] for _ in range(3)]
            got = http.get(f"/jobs/{first}").json()
            assert got["created_at"].endswith(("Z", "+00:00")), got  # UTC, not the database's
            assert [j["id"] for j in http.get("/jobs").json()["items"]] == [
                *reversed(missed),
                first,
            ]
            assert http.get("/jobs/stats").json()["queued"] == 4
        again = world.stream(api, world.token_a, headers={"Last-Event-ID": seen.id or ""})
        assert again.until("ready").json["resumed"] is True
        assert [e.json["job"]["id"] for e in again.jobs(3)] == missed
    finally:
        world.close()


@pytest.fixture
def replica_world(standby: Standby) -> Iterator[tuple[World, Standby]]:
    """An API on the standby's primary reading from the standby; empty tables, replay on."""
    from jobs_postgres.database import create_engine
    from sqlalchemy import text

    engine = create_engine(standby.primary_url, pool_size=2)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {TABLES}"))
    world = World(standby.primary_url, engine)
    try:
        yield world, standby
    finally:
        world.close()
        standby.resume()
        engine.dispose()


@pytest.mark.replica
@pytest.mark.xdist_group("standby")  # one primary and standby for the session's replica tests
def test_reads_come_from_the_standby_except_an_orgs_own_writes_until_replayed(
    replica_world: tuple[World, Standby],
) -> None:
    world, standby = replica_world
    api = world.start(JOBS_READ_DATABASE_URL=standby.standby_url)
    wait_until(standby.caught_up, 30, "the standby to replay the tokens")
    standby.pause()
    # Org B's job is written by a worker (not through this API) while the standby lags: B's
    # reads go to the standby, which does not have it yet.
    theirs = world.service.enqueue(ORG_B, "noop").job
    with world.http(api, world.token_b) as http:
        assert http.get(f"/jobs/{theirs.id}").status_code == 404
        assert http.get("/jobs/stats").json()["queued"] == 0
    # Org A's own write is read back at once: from the primary.
    with world.http(api, world.token_a) as http:
        mine = http.post("/jobs", json={"type": "noop"}).json()["id"]
        assert http.get(f"/jobs/{mine}").json()["status"] == "queued"
        assert [j["id"] for j in http.get("/jobs").json()["items"]] == [mine]
        cancelled = http.post(f"/jobs/{mine}/cancel").json()
        assert cancelled["status"] == "cancelled"
        assert http.get(f"/jobs/{mine}").json()["status"] == "cancelled"
    standby.resume()
    wait_until(standby.caught_up, 30, "the standby to catch up")
    with world.http(api, world.token_b) as http:
        assert http.get(f"/jobs/{theirs.id}").json()["status"] == "queued"
    with world.http(api, world.token_a) as http:
        assert http.get(f"/jobs/{mine}").json()["status"] == "cancelled"


@pytest.mark.replica
@pytest.mark.xdist_group("standby")
def test_a_resume_under_replica_lag_loses_no_event_and_repeats_none(
    replica_world: tuple[World, Standby],
) -> None:
    world, standby = replica_world
    api = world.start(JOBS_READ_DATABASE_URL=standby.standby_url)
    stream = world.stream(api, world.token_a)
    stream.until("ready")
    first = world.service.enqueue(ORG_A, "noop").job
    seen = stream.jobs(1)[0]
    assert seen.json["job"]["id"] == str(first.id)
    stream.close()
    # Two changes the standby replays, then two it does not have when the client resumes.
    replayed = [world.service.enqueue(ORG_A, "noop").job for _ in range(2)]
    wait_until(standby.caught_up, 30, "the standby to replay the first two")
    standby.pause()
    lagging = [world.service.enqueue(ORG_A, "noop").job for _ in range(2)]
    world.service.cancel(ORG_A, replayed[0].id)
    again = world.stream(api, world.token_a, headers={"Last-Event-ID": seen.id or ""})
    assert again.until("ready").json["resumed"] is True
    got = [(e.json["kind"], e.json["job"]["id"]) for e in again.jobs(5)]
    assert got == [
        *(("enqueued", str(job.id)) for job in replayed),
        *(("enqueued", str(job.id)) for job in lagging),
        ("cancelled", str(replayed[0].id)),
    ]
    # The live events follow without a repeat, whether the standby has caught up or not.
    live = world.service.enqueue(ORG_A, "noop").job
    assert again.jobs(1)[0].json["job"]["id"] == str(live.id)
    standby.resume()
    wait_until(standby.caught_up, 30, "the standby to catch up")
    later = world.service.enqueue(ORG_A, "noop").job
    assert again.jobs(1)[0].json["job"]["id"] == str(later.id)
