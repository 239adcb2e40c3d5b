"""The replay of a resuming event stream read from a lagging standby (``jobs_api.events._replay``
with a ``history`` feed; decision 0040): whatever the standby has replayed — nothing, part, all —
or if it cannot be read, the client gets exactly the frames a replay from the primary gives: no
event lost, none twice, none out of order. The standby here is the primary's log cut at a
position, as a standby shows a prefix of the primary's commits; tests/api/test_scale_http.py runs
it against a real one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from jobs_api import events as stream
from jobs_api.event_hub import Subscriber
from jobs_api.event_ids import EventIds
from jobs_core import FakeClock, InMemoryJobStore, JobService, StoreUnavailable
from jobs_core.events import START, EventBatch, InMemoryEventLog, Position

from tests.api.helpers import make_registry

ORG = "org-replay"


class Standby:
    """The primary's log as a standby that has replayed up to ``replayed`` shows it."""

    def __init__(self, primary: InMemoryEventLog, replayed: Position | None) -> None:
        self.primary = primary
        self.replayed = replayed
        self.reads = 0

    def read(self, after: Position, limit: int, org_id: str | None = None) -> EventBatch:
        self.reads += 1
        if self.replayed is None:
            raise StoreUnavailable("the standby is away")
        batch = self.primary.read(after, limit, org_id)
        shown = [e for e in batch.events if e.position <= self.replayed]
        return EventBatch(shown, max(after, min(batch.cursor, self.replayed)))


def _log() -> tuple[InMemoryEventLog, list[Position]]:
    store = InMemoryJobStore()
    service = JobService(store, make_registry(), FakeClock())
    jobs = [service.enqueue(ORG, "noop").job for _ in range(7)]
    service.enqueue("another-org", "noop")
    service.cancel(ORG, jobs[2].id)
    service.enqueue(ORG, "noop")
    log = store.events
    return log, [e.position for e in log.read(START, 100, ORG).events]


IDS = EventIds(b"k" * 32)


async def _replayed(
    log: InMemoryEventLog, after: Position, history: Any
) -> list[tuple[Position | None, str]]:
    """The replay's frames as (the position its id names, the rest of the frame)."""
    hub: Any = SimpleNamespace(feed=log, ids=IDS)
    subscriber = Subscriber(org_id=ORG, job_id=None, type=None, statuses=None, buffer=100)
    until = log.present().cursor
    replay = stream._replay(hub, subscriber, after, until=until, history=history)
    text = b"".join([frames async for frames, _ in replay]).decode()
    out = []
    for frame in filter(None, text.split("\n\n")):
        first, _, rest = frame.partition("\n")
        assert first.startswith("id: "), frame
        out.append((IDS.decode(first[4:]), rest))
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("replayed", [None, 0, 1, 4, 8, 9], ids=lambda r: f"standby-at-{r}")
async def test_a_lagging_or_absent_standby_replays_what_the_primary_does(
    replayed: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "REPLAY_PAGE", 3)  # several pages, on both feeds
    log, positions = _log()
    after = positions[0]  # the client had seen the first event
    expected = await _replayed(log, after, None)
    assert [position for position, _ in expected] == positions[1:]
    cut = None if replayed is None else ([START, *positions][min(replayed, len(positions))])
    standby = Standby(log, cut)
    assert await _replayed(log, after, standby) == expected
    assert standby.reads >= 1  # the standby was asked first
