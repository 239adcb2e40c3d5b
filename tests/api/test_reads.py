"""The routing of the API's reads (``jobs_api.reads.Reads``): to the standby, except an org's
reads after its own write until the standby has replayed past it. The WAL positions are a fake
here; tests/api/test_replica_http.py runs it against a real standby."""

from __future__ import annotations

from jobs_api.reads import Reads
from jobs_core import FakeClock, InMemoryJobStore, JobService, Registry


class Positions:
    """WAL positions the test moves: ``written`` on the primary, ``replayed`` on the standby."""

    def __init__(self) -> None:
        self.written_at = 100
        self.replayed_at = 100
        self.asked = 0
        self.down = False

    def written(self) -> int:
        return self.written_at

    def replayed(self) -> int:
        self.asked += 1
        if self.down:
            raise ConnectionError("the standby is away")
        return self.replayed_at


def _services() -> tuple[JobService, JobService]:
    registry, clock = Registry("reads"), FakeClock()
    return (
        JobService(InMemoryJobStore(), registry, clock),
        JobService(InMemoryJobStore(), registry, clock),
    )


def test_without_a_standby_every_read_is_the_primarys() -> None:
    primary, _ = _services()
    reads = Reads(primary)
    reads.wrote("a")
    assert reads.service("a") is primary
    assert reads.history() is None
    assert not reads.has_standby


def test_an_orgs_reads_go_to_the_primary_until_the_standby_replayed_its_write() -> None:
    primary, standby = _services()
    positions = Positions()
    reads = Reads(primary, standby, positions=positions, recheck_s=0)
    assert reads.service("a") is standby  # no write of its own: the standby
    positions.written_at = 150
    reads.wrote("a")
    assert reads.service("a") is primary  # the standby is at 100
    assert reads.service("b") is standby  # another org did not write
    positions.replayed_at = 149
    assert reads.service("a") is primary
    positions.replayed_at = 150
    assert reads.service("a") is standby
    asked = positions.asked
    assert reads.service("a") is standby  # forgotten: the standby is not asked again
    assert positions.asked == asked


def test_the_replay_position_is_asked_at_most_once_per_recheck_interval() -> None:
    primary, standby = _services()
    positions = Positions()
    reads = Reads(primary, standby, positions=positions, recheck_s=3600)
    positions.written_at = 200
    reads.wrote("a")
    assert reads.service("a") is primary
    positions.replayed_at = 300
    assert reads.service("a") is primary  # the answer of a moment ago is still trusted
    assert positions.asked == 1


def test_a_later_write_is_waited_for_and_an_unreachable_standby_means_the_primary() -> None:
    primary, standby = _services()
    positions = Positions()
    reads = Reads(primary, standby, positions=positions, recheck_s=0)
    positions.written_at = 120
    reads.wrote("a")
    positions.written_at = 180
    reads.wrote("a")
    positions.replayed_at = 150
    assert reads.service("a") is primary  # past the first write, not the second
    positions.down = True
    positions.replayed_at = 500
    assert reads.service("a") is primary  # cannot tell: the primary (logged)
    positions.down = False
    assert reads.service("a") is standby
