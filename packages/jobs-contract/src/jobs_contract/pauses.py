"""Paused job types (:class:`jobs_core.ports.TypePauses`, issue 24): a paused type's queued jobs
stay queued and no claim takes them, whatever the claim's selections (types, fairness, limits,
with a finish); other types are claimed as before; a resume makes them claimable again, and
"why is it waiting" says ``type_paused``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from jobs_core import Done, FakeClock, FlowLimit, JobService, JobStore, Status, domain
from jobs_core.errors import UnknownJobType
from jobs_core.flow import FairTurn
from jobs_core.ports import ClaimNext

from jobs_contract.fixtures import (  # noqa: F401 (fixtures: pytest sees them)
    clock_fixture,
    failures_fixture,
    service_fixture,
    store_fixture,
)

ORG = "org-a"


def test_a_paused_type_is_never_claimed_and_its_jobs_stay_queued(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    held = service.enqueue(ORG, "reconcile", {"n": 1}).job
    other = service.enqueue(ORG, "crawl", {"n": 2}).job
    pause = service.pause_type("reconcile", "cli:ops")
    assert (pause.type, pause.paused_at, pause.paused_by) == ("reconcile", clock.now(), "cli:ops")
    clock.advance(1)
    assert [j.id for j in service.claim(10)] == [other.id]
    assert service.claim(10) == []
    assert service.get(ORG, held.id).status is Status.QUEUED
    assert service.get(ORG, held.id).attempts == 0
    # every selection of the claim passes over it: types, fair turns, limits
    assert store.claim(10, clock.now(), ["reconcile"]) == []
    assert store.claim(10, clock.now(), ["reconcile"], turn=FairTurn()) == []
    limits = {"reconcile": FlowLimit(key_limit=None, type_limit=5)}
    assert store.claim(10, clock.now(), ["reconcile"], limits=limits) == []
    assert store.claim(10, clock.now(), None, limits=limits, turn=FairTurn("a")) == []


def test_a_finish_and_claim_passes_over_a_paused_type(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    running = service.enqueue(ORG, "crawl", {"n": 1}).job
    [held] = service.claim(1)
    assert held.id == running.id
    paused = service.enqueue(ORG, "reconcile", {"n": 2}).job
    free = service.enqueue(ORG, "crawl", {"n": 3}).job
    service.pause_type("reconcile", "api:ops")
    clock.advance(1)
    done = domain.patch(held.ref, Done({}), clock.now())
    finished, claimed = store.complete(
        [done], claim_next=ClaimNext(10, clock.now(), None, None, FairTurn())
    )
    assert finished[0] is not None
    assert finished[0].status is Status.DONE
    assert [j.id for j in claimed] == [free.id]
    assert service.get(ORG, paused.id).status is Status.QUEUED


def test_a_resumed_type_is_claimed_again_in_its_order(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    first = service.enqueue(ORG, "reconcile", {"n": 1}).job
    clock.advance(1)
    second = service.enqueue(ORG, "reconcile", {"n": 2}).job
    service.pause_type("reconcile", "cli:ops")
    assert service.claim(10) == []
    assert service.resume_type("reconcile") is True
    assert service.resume_type("reconcile") is False
    assert store.paused() == []
    assert [j.id for j in service.claim(10)] == [first.id, second.id]


def test_pausing_twice_keeps_the_first_pause_and_the_list_is_by_name(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    first = store.pause("reconcile", "cli:alice", clock.now())
    clock.advance(5)
    again = store.pause("reconcile", "api:bob", clock.now())
    assert again == first
    store.pause("crawl", "api:bob", clock.now())
    assert [(p.type, p.paused_by) for p in store.paused()] == [
        ("crawl", "api:bob"),
        ("reconcile", "cli:alice"),
    ]
    assert service.paused_types()["reconcile"].paused_at == first.paused_at
    assert first.paused_at == clock.now() - timedelta(seconds=5)


def test_a_waiting_job_of_a_paused_type_says_so(service: JobService, clock: FakeClock) -> None:
    job = service.enqueue(ORG, "reconcile", {"n": 1}).job
    assert "type_paused" not in [r.code for r in service.why_waiting(job)]
    service.pause_type("reconcile", "cli:ops")
    reasons = service.why_waiting(job)
    assert reasons[0].code == "type_paused"
    assert "jobs resume reconcile" in reasons[0].message
    service.resume_type("reconcile")
    assert "type_paused" not in [r.code for r in service.why_waiting(job)]


def test_an_unknown_type_cannot_be_paused_but_any_paused_name_can_be_resumed(
    service: JobService, store: JobStore, clock: FakeClock
) -> None:
    with pytest.raises(UnknownJobType):
        service.pause_type("no_such_type", "cli:ops")
    assert store.paused() == []
    store.pause("retired_type", "cli:ops", clock.now())  # a type no longer registered
    assert service.resume_type("retired_type") is True
