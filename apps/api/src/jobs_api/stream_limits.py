"""How many event streams a credential and an org may hold open on one API process
(``JOBS_EVENTS_MAX_STREAMS_PER_TOKEN`` and ``_PER_ORG``, docs/events.md): one tenant's thousand
streams would otherwise each hold a subscriber, a buffer and a connection of the process."""

from __future__ import annotations

import collections
from collections.abc import Callable

from starlette.exceptions import HTTPException

RETRY_AFTER_S = 5
"""What a refused stream is told to wait before trying again."""


class TooManyStreams(HTTPException):
    """A stream over a cap: answered ``429`` (problem ``too-many-streams``) with
    ``Retry-After`` (the app's HTTP error handler reads ``problem_kind``)."""

    problem_kind = "too-many-streams"

    def __init__(self, detail: str) -> None:
        super().__init__(429, detail, headers={"Retry-After": str(RETRY_AFTER_S)})


class StreamLimits:
    """The open streams of this process per credential and per org, and their caps.

    Used on the event loop only (no lock): :meth:`acquire` counts a stream before its ``200``
    is answered, and the release it returns uncounts it when the stream ends (once, however
    often it is called).
    """

    def __init__(self, per_credential: int, per_org: int) -> None:
        self.per_credential = per_credential
        self.per_org = per_org
        self._credentials: collections.Counter[str] = collections.Counter()
        self._orgs: collections.Counter[str] = collections.Counter()
        self.total = 0
        """The open streams of this process (read by the metrics' scrape, from any thread)."""

    def open_streams(self, org_id: str) -> int:
        """The org's open streams in this process."""
        return self._orgs[org_id]

    def acquire(self, org_id: str, credential: str) -> Callable[[], None]:
        """Count one more stream of ``credential`` (of ``org_id``); :class:`TooManyStreams`
        past a cap."""
        if self._credentials[credential] >= self.per_credential:
            raise TooManyStreams(
                f"this token or session already holds {self.per_credential} open event streams "
                "on this API process (JOBS_EVENTS_MAX_STREAMS_PER_TOKEN); close one (one "
                "stream can follow every job of the org) before opening another"
            )
        if self._orgs[org_id] >= self.per_org:
            raise TooManyStreams(
                f"the org already holds {self.per_org} open event streams on this API process "
                "(JOBS_EVENTS_MAX_STREAMS_PER_ORG); close one before opening another"
            )
        self._credentials[credential] += 1
        self._orgs[org_id] += 1
        self.total += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.total -= 1
            for counter, key in ((self._credentials, credential), (self._orgs, org_id)):
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]

        return release
