"""A handler's store calls end, for the handler, when its attempt is fenced
(jobs_worker.handler_calls; docs/worker.md, "The lease fence")."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from jobs_worker.handler_calls import HandlerCalls


@pytest.fixture
def calls() -> Iterator[HandlerCalls]:
    pool = HandlerCalls(2)
    yield pool
    pool.close()


def test_a_call_that_ends_gives_its_result(calls: HandlerCalls) -> None:
    assert calls.for_attempt().run(lambda: 42) == (True, 42)


def test_a_call_that_fails_raises_in_the_handler(calls: HandlerCalls) -> None:
    def fail() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        calls.for_attempt().run(fail)


def test_the_fence_releases_a_handler_blocked_in_a_call(calls: HandlerCalls) -> None:
    attempt = calls.for_attempt()
    entered, release = threading.Event(), threading.Event()
    answers: list[tuple[bool, object]] = []

    def blocked() -> str:
        entered.set()
        release.wait(30)
        return "late"

    handler = threading.Thread(target=lambda: answers.append(attempt.run(blocked)))
    handler.start()
    assert entered.wait(10)
    handler.join(0.2)
    assert handler.is_alive()  # the call blocks, and the handler with it, until the fence
    attempt.fence()
    handler.join(10)
    assert not handler.is_alive()
    assert answers == [(False, None)]
    # Later calls of the fenced attempt do not even start; other attempts are not affected.
    started: list[int] = []
    assert attempt.run(lambda: started.append(1)) == (False, None)
    assert started == []
    release.set()
    assert calls.for_attempt().run(lambda: "other") == (True, "other")
