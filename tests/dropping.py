"""Dropping the tests' databases off the tests' clock.

PostgreSQL (up to 16) forces a checkpoint in every ``DROP DATABASE`` and waits for it: every dirty
page of the server, the other xdist workers' included, is written and synced before the drop
returns. On the shared 2-core machine a drop took 0.5 s to 6 s, and the suite drops a database
after each test that made one (an unmigrated scratch database, a copy of the million-row
history, a browser module's system, a CLI test's fresh database...).

:func:`drop_later` hands the drop to a thread of this test process, so the test ends at once
and the next one starts while the server checkpoints; every name is unique (a random suffix),
so nothing waits for it. :func:`finish` waits for the drops handed over so far and raises if
one failed; the root ``pg_server`` fixture calls it before the session's server goes (the
embedded one is stopped then), so a run still ends with every database it made dropped.
"""

from __future__ import annotations

import queue
import threading


class _Dropper:
    """One thread that drops the databases handed to it, in order."""

    def __init__(self) -> None:
        self._pending: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._failures: list[str] = []
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _drain(self) -> None:
        from jobs_postgres.database import drop_database

        while True:
            item = self._pending.get()
            if item is None:
                return
            admin_url, name = item
            try:
                drop_database(admin_url, name)
            except Exception as error:  # reported by finish(), on the test session's clock
                self._failures.append(f"{name}: {error!r}")

    def drop_later(self, admin_url: str, name: str) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._drain, name="drop-databases", daemon=True
                )
                self._thread.start()
            self._pending.put((admin_url, name))

    def finish(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._pending.put(None)
        if thread is not None:
            thread.join()
        failed, self._failures = self._failures, []
        if failed:
            raise AssertionError(f"databases the tests made were not dropped: {failed}")


_DROPPER = _Dropper()


def drop_later(admin_url: str, name: str) -> None:
    """Drop database ``name`` (its connections closed) on a thread of this process; ``admin_url``
    names another database of the same server to connect to."""
    _DROPPER.drop_later(admin_url, name)


def finish() -> None:
    """Wait until every database handed to :func:`drop_later` is dropped; raise if one was not."""
    _DROPPER.finish()
