"""The one place the module touches the job lifecycle (docs/lifecycle.md): its checkpoint and
its end hooks.

- The crawl's frontier is the job's **private checkpoint**: saved with the public progress in
  one statement (``ctx.save_progress(..., checkpoint=...)``), read back by the next run
  (``ctx.resume``), never shown by ``GET /jobs/{id}``, ``jobs show`` or the event
  stream. The public progress says only how far the crawl is (``done`` of ``total`` URLs).
- When a job of the module ends **failed or cancelled** (a job cancelled while still queued
  included), a hook brings the module's rows in line. Hooks run at least once: they are
  idempotent (``records.finish`` leaves a row that already ended alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs_core import Job, JobContext

from jobs_linkcheck.crawl import Frontier

EndHook = Callable[[Job], object]


def saved_frontier(ctx: JobContext) -> tuple[Frontier, int] | None:
    """The frontier the previous run saved, and how many fetches the crawl had awaited then
    (None at the crawl's first run)."""
    document = ctx.resume
    if document is None:
        return None
    return Frontier.from_checkpoint(document), int(document.get("awaited", 0))


def save_frontier(ctx: JobContext, frontier: Frontier, awaited: int) -> bool:
    """Save the frontier durably with the crawl's public progress, and ``awaited`` (how many
    fetches it had waited for before this wave: more, when it runs again, means the wave was
    written); False if it was not saved (the store was unreachable, or the attempt lost its
    lease: then it is cancelled)."""
    checkpoint = {**frontier.to_checkpoint(), "awaited": awaited}
    return ctx.save_progress(len(frontier.done), frontier.seen, checkpoint=checkpoint)


def end_hooks(hook: EndHook) -> dict[str, Any]:
    """The :class:`~jobs_core.JobType` arguments that run ``hook`` when a job ends failed or
    cancelled."""
    return {"on_fail": hook, "on_cancel": hook}
