"""The one place the module touches the job lifecycle: its checkpoint and its end hooks.

- the crawl's frontier is saved as the job's checkpoint and read back by the next attempt;
- when a job of the module ends failed or cancelled, a hook brings the domain rows in line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs_core import Job, JobContext

from jobs_linkcheck.crawl import Frontier

EndHook = Callable[[Job], object]


def saved_frontier(ctx: JobContext) -> Frontier | None:
    """The frontier the previous attempt saved (None on the first attempt)."""
    document = ctx.checkpoint
    if not document or "frontier" not in document:
        return None
    return Frontier.from_checkpoint(document["frontier"])


def save_frontier(ctx: JobContext, frontier: Frontier) -> None:
    """Save the frontier (durably: not throttled) with the crawl's progress."""
    done = len(frontier.done)
    ctx.report_progress(done, frontier.seen, force=True, frontier=frontier.to_checkpoint())


def end_hooks(hook: EndHook) -> dict[str, Any]:
    """The :class:`~jobs_core.JobType` arguments that run ``hook`` when a job ends failed."""
    return {"on_fail": hook}
