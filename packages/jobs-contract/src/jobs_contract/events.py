"""The event feed contract (docs/events.md): one event per visible committed change, in order,
org-scoped reads, heartbeats never events; the same on every adapter (the PostgreSQL kinds come
from the SQL trigger, the memory ones from ``jobs_core.events.change_kind``)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from jobs_core import (
    Done,
    Failed,
    FakeClock,
    JobService,
    JobStore,
    Requeue,
    Status,
)
from jobs_core.events import START, EventFeed, JobEvent, Position

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, service_for

ORG = "org-a"
OTHER_ORG = "org-b"


@pytest.fixture
def feed(jobs_event_feed: EventFeed) -> EventFeed:
    """The event feed of the store under test (the adapter's ``jobs_event_feed``)."""
    return jobs_event_feed


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    """The use cases over the store under test."""
    return service_for(store, clock)


def everything(
    feed: EventFeed, after: Position = START, org_id: str | None = None
) -> list[JobEvent]:
    """Every event after ``after`` committed before the call, read in small pages (paging is
    part of the contract). An adapter may hold events back a moment (PostgreSQL's boundary waits
    for a transaction of the server that is still open, another database's included): an empty
    page before the head of the call means "not yet", read again shortly, never "all read"."""
    target = feed.head()
    events: list[JobEvent] = []
    cursor = after
    deadline = time.monotonic() + 30
    while True:
        batch = feed.read(cursor, 3, org_id)
        assert batch.cursor >= cursor
        events += batch.events
        cursor = batch.cursor
        if batch.events:
            continue
        if cursor >= target:
            return events
        assert time.monotonic() < deadline, f"the feed stayed behind its head {target}"
        time.sleep(0.005)


def kinds(events: list[JobEvent]) -> list[str]:
    return [event.kind.value for event in events]


def test_a_job_life_is_one_event_per_visible_change(
    service: JobService, feed: EventFeed, clock: FakeClock
) -> None:
    start = feed.head()
    job = service.enqueue(ORG, "reconcile", {"site": 1}).job
    running = claim_one(service)
    clock.advance(1)
    assert service.store.save_progress(running.ref, {"done": 1, "total": 3}, clock.now())
    clock.advance(1)
    assert service.store.heartbeat([running.ref], clock.now()) == {job.id}  # not an event
    clock.advance(1)
    assert service.store.save_progress(running.ref, {"done": 2, "total": 3}, clock.now())
    service.cancel(ORG, job.id)  # running: a request
    clock.advance(1)
    service.complete(running.ref, Done({"rows": 3}))
    service.delete(ORG, job.id)

    events = everything(feed, start)
    assert kinds(events) == [
        "enqueued",
        "claimed",
        "progress",
        "progress",
        "cancel_requested",
        "done",
        "deleted",
    ]
    assert [e.position for e in events] == sorted({e.position for e in events})  # ordered, unique
    assert all(e.job.id == job.id and e.job.org_id == ORG for e in events)
    states = [e.job.status for e in events]
    assert states == [Status.QUEUED, *[Status.RUNNING] * 4, Status.DONE, Status.DONE]
    assert events[2].job.progress is not None
    assert events[2].job.progress["done"] == 1
    assert events[3].job.progress is not None
    assert events[3].job.progress["done"] == 2
    assert events[4].job.cancel_requested_at is not None
    assert events[5].job.report == {"rows": 3}
    assert events[1].job.attempts == 1
    assert all(e.job.lease is None for e in events)  # the fencing token is never logged


def test_failures_requeues_retries_and_queued_cancels(
    service: JobService, feed: EventFeed, clock: FakeClock
) -> None:
    start = feed.head()
    job = service.enqueue(ORG, "boom").job
    first = claim_one(service)
    service.complete(first.ref, Requeue(run_at=clock.now(), error="later"))
    second = claim_one(service)
    service.complete(second.ref, Failed("broke"))
    service.retry(ORG, job.id)
    queued = service.enqueue(ORG, "reconcile").job
    service.cancel(ORG, queued.id)
    events = everything(feed, start)
    assert kinds(events) == [
        "enqueued",
        "claimed",
        "requeued",
        "claimed",
        "failed",
        "requeued",
        "enqueued",
        "cancelled",
    ]
    assert events[4].job.error == "broke"
    assert events[5].job.attempts == 0


def test_the_sweep_requeues_a_silent_job(
    service: JobService, feed: EventFeed, clock: FakeClock
) -> None:
    start = feed.head()
    service.enqueue(ORG, "reconcile")
    claim_one(service)
    clock.advance(3600)
    service.sweep(600)
    assert kinds(everything(feed, start)) == ["enqueued", "claimed", "requeued"]


def test_bulk_enqueue_and_claims_log_every_job(
    service: JobService, feed: EventFeed, clock: FakeClock
) -> None:
    start = feed.head()
    jobs = service.enqueue_many(ORG, "reconcile", [{"n": i} for i in range(7)])
    claimed = service.claim(5)
    events = everything(feed, start)
    assert kinds(events) == ["enqueued"] * 7 + ["claimed"] * 5
    assert {e.job.id for e in events[:7]} == {j.id for j in jobs}
    assert {e.job.id for e in events[7:]} == {j.id for j in claimed}


def test_reads_of_one_org_see_only_its_jobs(
    service: JobService, feed: EventFeed, clock: FakeClock
) -> None:
    start = feed.head()
    mine = [service.enqueue(ORG, "reconcile", {"n": i}).job.id for i in range(4)]
    theirs = [service.enqueue(OTHER_ORG, "reconcile", {"n": i}).job.id for i in range(4)]
    assert [e.job.id for e in everything(feed, start, ORG)] == mine
    assert [e.job.id for e in everything(feed, start, OTHER_ORG)] == theirs
    assert len(everything(feed, start)) == 8


def test_reading_after_a_position_gives_exactly_the_later_events(
    service: JobService, feed: EventFeed
) -> None:
    start = feed.head()
    for i in range(6):
        service.enqueue(ORG, "reconcile", {"n": i})
    events = everything(feed, start)
    middle = events[2].position
    assert everything(feed, middle) == events[3:]
    assert everything(feed, events[-1].position) == []
    batch = feed.read(events[-1].position, 10)
    assert batch.events == []
    assert batch.cursor >= events[-1].position


def test_the_head_is_after_every_committed_event(service: JobService, feed: EventFeed) -> None:
    service.enqueue(ORG, "reconcile")
    head = feed.head()
    assert everything(feed, head) == []
    later = service.enqueue(ORG, "reconcile").job
    assert [e.job.id for e in everything(feed, head)] == [later.id]
    assert feed.horizon() <= head


def test_the_present_tells_committed_changes_apart(service: JobService, feed: EventFeed) -> None:
    start = feed.head()
    before = service.enqueue(ORG, "reconcile").job
    present = feed.present()
    after = service.enqueue(ORG, "reconcile").job
    by_job = {e.job.id: e.position for e in everything(feed, start)}
    assert present.committed(by_job[before.id])
    assert not present.committed(by_job[after.id])
    assert present.cursor <= present.until


def test_wait_returns_by_its_timeout_and_the_change_is_then_read(
    service: JobService, feed: EventFeed
) -> None:
    """A wait may return early (an adapter told of changes) or sleep its whole timeout (a
    polled one): either way it returns, and a read after it finds what committed before."""
    start = feed.head()
    job = service.enqueue(ORG, "reconcile").job
    finished = threading.Event()

    def waiter() -> None:
        feed.wait(0.2)
        finished.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert finished.wait(30), "wait(0.2) did not return"
    thread.join()
    assert [e.job.id for e in everything(feed, start)] == [job.id]


def test_close_ends_a_wait_in_progress(feed: EventFeed) -> None:
    feed.wait(0.01)
    finished = threading.Event()

    def waiter() -> None:
        feed.wait(3600)
        finished.set()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    # A close before the waiter starts waiting need not end its wait: close until one does (one
    # is enough once it waits), for at most 30 s.
    deadline = time.monotonic() + 30
    while not finished.wait(0.05) and time.monotonic() < deadline:
        feed.close()
    assert finished.is_set(), "close() left a wait(3600) blocked"
    thread.join()


def test_prune_moves_the_horizon(service: JobService, feed: EventFeed, clock: FakeClock) -> None:
    start = feed.head()
    service.enqueue(ORG, "reconcile")
    service.enqueue(ORG, "reconcile")
    events = everything(feed, start)
    assert feed.prune(events[-1].at + timedelta(microseconds=1)) >= 2
    assert feed.horizon() >= events[-1].position
    assert everything(feed, start) == []


def test_the_id_key_is_stable_and_secret_sized(feed: EventFeed) -> None:
    assert feed.id_key() == feed.id_key()
    assert len(feed.id_key()) >= 16
