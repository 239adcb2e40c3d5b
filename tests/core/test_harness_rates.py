"""The testing kit honours rate limits on its fake clock as the stores do (issue 25 item 5,
decision 0042): a key's jobs are not claimed past N per window, and ``drain`` moves the clock to
the key's next start instead of stopping with jobs left."""

from __future__ import annotations

from datetime import timedelta

from jobs_core import JobContext, JobType, Registry, Status
from jobs_core.testing import JobsHarness


def _fetch(ctx: JobContext) -> None:
    return None


def _kit() -> JobsHarness:
    registry = Registry("kit-rates")
    registry.register(JobType("fetch", _fetch, concurrency_key="site", rate_limit=(2, 1)))
    return JobsHarness(registry)


def test_claim_honours_the_rate_on_the_fake_clock() -> None:
    kit = _kit()
    for _ in range(3):
        kit.enqueue("fetch", {"site": "a"})
    kit.enqueue("fetch", {"site": "b"})
    first, second = kit.run_next(), kit.run_next()
    assert first is not None
    assert second is not None
    assert {first.payload["site"], second.payload["site"]} == {"a"}
    other = kit.run_next()
    assert other is not None
    assert other.payload["site"] == "b"  # site a is spent, site b is not
    assert kit.claim() is None
    (held,) = kit.jobs(status=Status.QUEUED)
    assert "rate_limited" in {r.code for r in kit.service.why_waiting(held)}
    kit.advance(1)
    assert kit.run_next() is not None


def test_drain_waits_for_each_next_start() -> None:
    kit = _kit()
    start = kit.now()
    for _ in range(5):
        kit.enqueue("fetch", {"site": "a"})
    ran = kit.drain()
    assert [j.status for j in ran] == [Status.DONE] * 5
    offsets = sorted((j.started_at - start) for j in ran if j.started_at is not None)
    assert offsets == [timedelta(0)] * 2 + [timedelta(seconds=1)] * 2 + [timedelta(seconds=2)]
