"""The lease fence's rule on a clock the test moves (jobs_worker.fence; docs/worker.md)."""

from __future__ import annotations

import threading
import time
import uuid

from jobs_worker.fence import LEASE_UNPROVEN, LeaseFence


def test_a_lease_unproven_for_the_window_is_fenced_then_reported_wedged() -> None:
    now = [100.0]
    cancelled: list[str] = []
    wedged: list[str] = []
    fence = LeaseFence(3.0, 0.5, wedged.append, clock=lambda: now[0])
    job, other = uuid.uuid4(), uuid.uuid4()
    fence.track(job, 100.0, cancelled.append)
    fence.track(other, 100.0, lambda reason: None)
    now[0] = 102.0
    fence.proved([other], 101.9)  # only the other job was found held at 101.9
    assert fence.check() == 103.0
    assert cancelled == []
    now[0] = 103.0
    assert fence.check() == 103.5  # fenced now; must stop within 0.5 s
    assert len(cancelled) == 1
    assert cancelled[0].startswith(LEASE_UNPROVEN)
    assert fence.fenced(job)
    assert not fence.fenced(other)
    assert not fence.claiming_allowed
    fence.stopped(job)  # the handler returned in time: nothing is wedged
    now[0] = 104.0
    fence.link_ok()
    assert fence.claiming_allowed
    assert fence.check() == 104.9  # the other lease, proven at 101.9
    assert wedged == []


def test_a_fenced_handler_that_does_not_stop_is_reported_wedged() -> None:
    now = [0.0]
    wedged: list[str] = []
    fence = LeaseFence(1.0, 0.25, wedged.append, clock=lambda: now[0])
    fence.track(uuid.uuid4(), 0.0, lambda reason: None)
    now[0] = 1.0
    fence.check()
    now[0] = 1.2
    fence.check()
    assert wedged == []
    now[0] = 1.25
    fence.check()
    assert len(wedged) == 1
    assert "did not stop within 0.2 s" in wedged[0]


def test_the_fence_thread_acts_on_real_time() -> None:
    fired = threading.Event()
    fence = LeaseFence(0.2, 5.0, lambda reason: None)
    fence.start()
    try:
        fence.track(uuid.uuid4(), time.monotonic(), lambda reason: fired.set())
        assert fired.wait(5)
    finally:
        fence.close()
