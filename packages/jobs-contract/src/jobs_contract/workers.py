"""The worker registry's contract (:class:`jobs_core.workers.WorkerRegistry`, a role of every
store): workers register, show life, go, and the silent ones are forgotten (docs/flow-control.md),
on every adapter."""

from __future__ import annotations

import uuid
from dataclasses import replace

from jobs_core import FakeClock, JobStore
from jobs_core.workers import WORKER_SILENT_S, WorkerInfo

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)


def worker_info(clock: FakeClock, types: tuple[str, ...]) -> WorkerInfo:
    """A worker process serving ``types``, started now."""
    now = clock.now()
    return WorkerInfo(uuid.uuid4(), "host-1", 4242, types, 4, now, now)


def test_workers_register_show_life_and_go(store: JobStore, clock: FakeClock) -> None:
    a = worker_info(clock, ("crawl",))
    store.register_worker(a)
    clock.advance(1)
    b = worker_info(clock, ("plain", "fetch"))
    store.register_worker(b)
    assert [w.id for w in store.live_workers(clock.now())] == [a.id, b.id]
    assert store.live_workers(clock.now())[1].types == ("plain", "fetch")
    store.unregister_worker(a.id)
    assert [w.id for w in store.live_workers(clock.now())] == [b.id]
    clock.advance(WORKER_SILENT_S + 1)
    assert store.live_workers(clock.now()) == []  # silent: not live, forgotten
    assert store.worker_seen(b.id, clock.now()) is False


def test_a_worker_seen_again_stays_live_and_one_unregistered_may_register_again(
    store: JobStore, clock: FakeClock
) -> None:
    a = worker_info(clock, ("crawl",))
    store.register_worker(a)
    clock.advance(WORKER_SILENT_S - 1)
    assert store.worker_seen(a.id, clock.now()) is True
    seen_at = clock.now()
    clock.advance(WORKER_SILENT_S - 1)  # live: seen less than WORKER_SILENT_S ago
    (live,) = store.live_workers(clock.now())
    assert (live.id, live.last_seen_at) == (a.id, seen_at)
    store.unregister_worker(a.id)
    assert store.worker_seen(a.id, clock.now()) is False
    store.register_worker(replace(a, last_seen_at=clock.now()))  # what a presence does then
    assert [w.id for w in store.live_workers(clock.now())] == [a.id]
