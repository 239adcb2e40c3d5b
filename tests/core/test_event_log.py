"""The in-memory event log's wake-ups: the store tells its log of every change, so a wait
returns as soon as one is recorded (the contract suite only asks that a wait returns by its
timeout, which PostgreSQL's polled feed does by sleeping it)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from jobs_core import NewJob
from jobs_core.memory import InMemoryJobStore


def test_a_wait_returns_when_a_change_is_recorded() -> None:
    store = InMemoryJobStore()
    woke = threading.Event()

    def waiter() -> None:
        store.events.wait(3600)
        woke.set()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    # A change recorded before the waiter starts waiting does not wake it: keep changing until
    # one does (one is enough once it waits), for at most 30 s.
    deadline = time.monotonic() + 30
    n = 0
    while not woke.wait(0.05) and time.monotonic() < deadline:
        store.insert(NewJob("org-a", "noop", {"n": n}), datetime.now(UTC))
        n += 1
    assert woke.is_set(), "wait(3600) did not return on a change"
    thread.join()
