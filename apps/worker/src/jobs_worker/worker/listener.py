"""The listener: turns :class:`~jobs_core.ports.Wakeup` signals (LISTEN/NOTIFY) into claims.

A thread of its own; it only wakes the completer (:meth:`Shared.wake`), which keeps its own poll
as the fallback. It ends when ``halt`` is set.
"""

from __future__ import annotations

import time

from jobs_core import Wakeup

from jobs_worker.worker.state import Shared

LISTEN_WAIT_S = 0.5


def listen(shared: Shared, wakeup: Wakeup) -> None:
    """The listener's thread."""
    retry = shared.retry("listen")
    halt = shared.halt
    # Short waits, so a stopping worker's listener notices ``halt`` soon.
    timeout = min(shared.config.poll_interval_s, LISTEN_WAIT_S)
    while not halt.is_set():
        began = time.monotonic()
        try:
            woken = wakeup.wait(timeout)
        except Exception as error:
            halt.wait(retry.failed(error))
            continue
        retry.succeeded()
        if woken:
            shared.wake()
        elif time.monotonic() - began < timeout / 2:
            # A wake-up that returns at once (closed, reconnecting) must not spin a core.
            halt.wait(timeout / 2)
