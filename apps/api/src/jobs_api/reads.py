"""Where the API's reads go: the primary, or a streaming standby (``JOBS_READ_DATABASE_URL``).

:class:`Reads` is the one place that picks. :meth:`Reads.service` gives the
:class:`~jobs_core.JobService` an org's reads use (the list, the detail, the counts; a new read
route routes itself with ``reads.service(org)``); :meth:`Reads.history` the event feed a resuming
event stream replays from. Without a standby both are the primary's.

Read-your-writes: a write route calls :meth:`Reads.wrote` after its write committed; the
primary's WAL insert position is then noted for the org, and that org's reads go to the primary
until the standby has replayed past it (``pg_last_wal_replay_lsn()``, asked at most every
:data:`RECHECK_S` while some org waits for it). So a client reads back what it just enqueued,
cancelled, retried or deleted. The note is this process's: a client whose next request reaches
another API process may read the standby's older state until it catches up (docs/scaling.md).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jobs_core import JobService
    from jobs_core.events import EventFeed

log = logging.getLogger("jobs.api.reads")

RECHECK_S = 0.05
"""How long a standby's replay position is trusted before it is asked again (only while an org
waits for it to pass one of its writes)."""


class WalPositions(Protocol):
    """Positions in the primary's write-ahead log, as integers (``jobs_postgres.replica``)."""

    def written(self) -> int:
        """The primary's WAL insert position now: past every commit that has returned."""
        ...

    def replayed(self) -> int:
        """How far the standby has replayed the primary's WAL."""
        ...


class Reads:
    """The routing of the API's reads between the primary and an optional standby."""

    def __init__(
        self,
        primary: JobService,
        standby: JobService | None = None,
        *,
        positions: WalPositions | None = None,
        standby_history: EventFeed | None = None,
        recheck_s: float = RECHECK_S,
    ) -> None:
        if standby is not None and positions is None:
            raise ValueError("a standby needs the WAL positions of read-your-writes")
        self._primary = primary
        self._standby = standby
        self._positions = positions
        self._history = standby_history
        self._recheck_s = recheck_s
        self._lock = threading.Lock()
        self._waiting: dict[str, int] = {}  # org -> the WAL position its last write reached
        self._replayed = -1
        self._checked_at = float("-inf")

    @property
    def has_standby(self) -> bool:
        """True when reads may go to a standby."""
        return self._standby is not None

    def service(self, org: str) -> JobService:
        """The service ``org``'s reads use: the standby's, unless ``org`` wrote something the
        standby has not replayed yet (then the primary's)."""
        if self._standby is None:
            return self._primary
        with self._lock:
            needed = self._waiting.get(org)
        if needed is None or self.replayed_past(needed):
            return self._standby
        return self._primary

    def wrote(self, org: str) -> None:
        """``org`` has just written (its commit returned): read it from the primary until the
        standby has replayed this far. Costs one query on the primary, only with a standby."""
        if self._positions is None:
            return
        position = self._positions.written()
        with self._lock:
            self._waiting[org] = max(position, self._waiting.get(org, position))

    def replayed_past(self, position: int) -> bool:
        """True once the standby has replayed the primary's WAL up to ``position`` (the orgs
        that waited for less are forgotten). An unreachable standby has not (logged)."""
        assert self._positions is not None
        with self._lock:
            if self._replayed >= position:
                self._forget_replayed()
                return True
            if time.monotonic() - self._checked_at < self._recheck_s:
                return False
            self._checked_at = time.monotonic()
        try:
            replayed = self._positions.replayed()
        except Exception as error:
            log.warning("cannot read the standby's replay position (%s): primary reads", error)
            return False
        with self._lock:
            self._replayed = max(self._replayed, replayed)
            self._forget_replayed()
            return self._replayed >= position

    def _forget_replayed(self) -> None:
        for org in [o for o, at in self._waiting.items() if at <= self._replayed]:
            del self._waiting[org]

    def history(self) -> EventFeed | None:
        """The standby's event feed for the replays of resuming streams, if there is one.

        A replay read there stops at the standby's boundary; the stream goes on from the
        primary's feed for what the standby has not replayed (``jobs_api.events._replay``), so
        a lagging standby costs reads of the primary, never an event."""
        return self._history
