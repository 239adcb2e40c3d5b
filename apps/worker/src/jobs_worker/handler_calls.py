"""Store calls made from a handler's thread end, for the handler, when its lease is fenced
(docs/worker.md, "The lease fence").

A handler reaches the store through its context (``ctx.report_progress``). When the link to the
database goes silent, such a call blocks until its store timeout ``C`` aborts it (or longer:
opening a new connection waits for ``connect_timeout`` before any watchdog sees it), while the
fence gives a fenced handler only ``M/2`` to return. A handler blocked in a progress write at the
fence would then make the worker exit with code 5 although it is cooperative.

So a handler never waits for the store itself: its call runs on a helper thread, and the handler
waits until the call ends **or** its attempt is fenced, whichever comes first. On a fencing the
handler gets its answer at once (the write's result is unknown, and no longer matters: the
attempt is cancelled) and sees its cancellation; the call left behind ends by itself within the
store's own bounds, and a late write is refused by the job's lease if another attempt holds it.
The cost is a thread hand-off per progress write (writes are throttled, ~1 a second per job).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class HandlerCalls:
    """The helper threads of one worker (at most ``max_threads``, started on first use)."""

    def __init__(self, max_threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_threads, thread_name_prefix="jobs-handler-call")

    def for_attempt(self) -> AttemptCalls:
        """A new attempt's calls, fenced together by :meth:`AttemptCalls.fence`."""
        return AttemptCalls(self._pool)

    def close(self) -> None:
        """No new calls; calls still running end on their own (bounded by the store)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class AttemptCalls:
    """The store calls made by one attempt's handler."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._waiting: set[threading.Event] = set()
        self._fenced = False

    def fence(self) -> None:
        """The attempt is fenced: every call it waits for, and every later one, returns now."""
        with self._lock:
            self._fenced = True
            waiting = list(self._waiting)
        for settled in waiting:
            settled.set()

    def run(self, call: Callable[[], T]) -> tuple[bool, T | None]:
        """``(True, result)`` of ``call``, run on a helper thread; ``(False, None)`` if the
        attempt was fenced before it ended (``call`` may still be running). An exception of
        ``call`` is raised here."""
        settled = threading.Event()
        with self._lock:
            if self._fenced:
                return False, None
            self._waiting.add(settled)
        try:
            future: Future[T] = self._pool.submit(call)
            future.add_done_callback(lambda _: settled.set())
            settled.wait()
        finally:
            with self._lock:
                self._waiting.discard(settled)
        if not future.done():
            return False, None
        return True, future.result()
