"""Bounded lists (``JobFilter.field_bytes``, ``jobs_core.listing``): every adapter leaves out
the same values of a listed job, those whose JSON text is larger than the bound, as
``Elided(size)``, and keeps the others whole; a read of the job alone is whole."""

from __future__ import annotations

import pytest
from jobs_core import Done, FakeClock, JobFilter, JobService, JobStore
from jobs_core.listing import Elided, elided_fields, json_bytes

from jobs_contract.fixtures import clock_fixture, store_fixture  # noqa: F401 (fixtures: pytest sees them)
from jobs_contract.helpers import claim_one, finish, service_for

ORG = "org-a"
BOUND = 1000


@pytest.fixture
def service(store: JobStore, clock: FakeClock) -> JobService:
    return service_for(store, clock)


def test_a_bounded_list_leaves_out_the_values_past_the_bound(
    service: JobService, clock: FakeClock
) -> None:
    small = {"site": "a\u00e9", "n": [1, 2.5, None, True]}
    large = {"blob": "\u00e9" * 600}  # 600 characters, 1,200 bytes of UTF-8
    assert json_bytes(small) < BOUND < json_bytes(large)
    service.enqueue(ORG, "crawl", small)
    running = claim_one(service)  # the only queued job
    service.store.save_progress(running.ref, large, running.run_at)
    clock.advance(1)
    assert finish(service.store, running.ref, Done(small), clock.now()) is not None
    kept = service.enqueue(ORG, "crawl", {"site": "b"}).job
    cut = service.enqueue(ORG, "reconcile", large).job

    listed = {job.id: job for job in service.list_jobs(ORG, JobFilter(field_bytes=BOUND))}
    assert listed[kept.id].payload == {"site": "b"}
    assert elided_fields(listed[kept.id]) == []
    assert listed[cut.id].payload == Elided(json_bytes(large))
    assert elided_fields(listed[cut.id]) == ["payload"]
    done = listed[running.id]
    whole_progress = service.get(ORG, running.id).progress  # with the heartbeat's stamp
    assert done.progress == Elided(json_bytes(whole_progress))
    assert elided_fields(done) == ["progress"]
    assert (done.payload, done.report) == (small, small)

    whole = service.list_jobs(ORG, JobFilter())
    assert all(elided_fields(job) == [] for job in whole)
    assert service.get(ORG, cut.id).payload == large
