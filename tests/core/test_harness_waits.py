"""The testing kit runs jobs that wait for others as a worker would (issue 25 item 5, decision
0041): a dependent is not run before its dependencies end, a batch's callback runs once after
every member and reads their ends with ``ctx.awaited()``, a failed dependency cancels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs_core import JobContext, JobType, Registry, Status
from jobs_core.testing import JobsHarness


def _harness() -> tuple[JobsHarness, list[str], list[dict[str, int]]]:
    ran: list[str] = []
    summaries: list[dict[str, int]] = []
    registry = Registry("kit-waits")

    def fetch(ctx: JobContext) -> Mapping[str, Any]:
        ran.append(f"fetch {ctx.payload['url']}")
        if ctx.payload.get("broken"):
            raise ValueError("404")
        return {"ok": True}

    def aggregate(ctx: JobContext) -> Mapping[str, Any]:
        summary = ctx.awaited()
        counts = {status.value: n for status, n in summary.counts.items() if n}
        summaries.append(counts)
        ran.append("aggregate")
        return counts

    registry.register(JobType("fetch", fetch))
    registry.register(JobType("aggregate", aggregate))
    return JobsHarness(registry), ran, summaries


def test_a_batch_callback_runs_last_and_once_with_its_members_ends() -> None:
    kit, ran, summaries = _harness()
    pages: list[dict[str, Any]] = [{"url": "/a"}, {"url": "/b", "broken": True}, {"url": "/c"}]
    batch = kit.service.enqueue_batch(
        kit.org, [("fetch", page) for page in pages], ("aggregate", {})
    )
    assert batch.callback.status is Status.WAITING
    kit.drain()
    assert ran == ["fetch /a", "fetch /b", "fetch /c", "aggregate"]
    assert summaries == [{"done": 2, "failed": 1}]
    assert kit.service.get(kit.org, batch.callback.id).status is Status.DONE


def test_a_dependent_waits_and_a_failed_dependency_cancels_it() -> None:
    kit, ran, _ = _harness()
    first = kit.enqueue("fetch", {"url": "/x", "broken": True})
    after = kit.service.enqueue_after(kit.org, "aggregate", {}, [first.id])
    assert kit.claim("aggregate") is None  # waiting
    kit.drain()
    assert ran == ["fetch /x"]
    cancelled = kit.service.get(kit.org, after.id)
    assert cancelled.status is Status.CANCELLED
    assert cancelled.error == f"a job it depends on ended failed: {first.id}"


def test_a_parent_waits_for_its_children_then_runs_again_with_their_ends() -> None:
    """Decision 0043: the kit's run of a parent that waits leaves it waiting (no slot), runs its
    children, releases it once, and its next run reads them."""
    kit, ran, summaries = _harness()

    def crawl(ctx: JobContext) -> Mapping[str, Any]:
        seen = ctx.awaited()
        if not seen.jobs:
            ran.append("fan out")
            ctx.enqueue_many("fetch", [{"url": "/a"}, {"url": "/b", "broken": True}])
            ctx.wait_for_children()
        ran.append("aggregate")
        return {status.value: n for status, n in seen.counts.items() if n}

    kit.registry.register(JobType("crawl", crawl))
    parent = kit.enqueue("crawl", {})
    waiting = kit.run_next("crawl")
    assert waiting is not None
    assert (waiting.status, waiting.attempts) == (Status.WAITING, 0)
    assert kit.claim("crawl") is None  # waiting for its children
    kit.drain()
    assert ran == ["fan out", "fetch /a", "fetch /b", "aggregate"]
    done = kit.service.get(kit.org, parent.id)
    assert (done.status, done.report) == (Status.DONE, {"done": 1, "failed": 1})
    assert [c.parent_id for c in kit.jobs("fetch")] == [parent.id, parent.id]
    assert summaries == []
