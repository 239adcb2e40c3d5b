"""A parent that waits for its children without a slot (issue 25, decision 0043).

A handler that fanned out (``ctx.enqueue``) ends its attempt with ``ctx.wait_for_children()``:
the outcome :class:`~jobs_core.outcomes.Wait`, whose patch (:func:`wait_patch`) leaves the job
``waiting``, its attempt handed back as a snooze's, its lease cleared. In the same write the store
inserts the children it held (:func:`jobs_core.children.children_due`) and gives the job the
edges of a batch's callback to the children of this attempt (:func:`awaited_children`): those
inserted and those enqueued at once (``Patch.awaits``). From there it is any waiter of
:mod:`jobs_core.waits` (rule ``ALL_ENDED``): each child's end is recorded in the write that ends
it, a release pass queues the parent once they have all ended (at once when they already have),
and its next run reads how they ended with ``ctx.awaited()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from jobs_core.states import Status

if TYPE_CHECKING:
    import uuid

    from jobs_core.domain import AttemptRef, Job, Patch
    from jobs_core.outcomes import Wait
    from jobs_core.waits import Ended


class NothingToWaitFor(RuntimeError):
    """``ctx.wait_for_children()`` in an attempt that enqueued no child: it would wait for
    nothing and run again at once, for ever."""


def wait_patch(ref: AttemptRef, outcome: Wait, now: datetime, worker: str | None) -> Patch:
    """The columns a :class:`~jobs_core.outcomes.Wait` writes: ``waiting`` (still active: its
    dedup key kept, no end, no end hook), the attempt not counted, the report the handler gave
    (else the job's), the children it held and the ids of those enqueued at once."""
    from jobs_core.domain import Patch

    job = ref.job
    return Patch(
        ref=ref,
        status=Status.WAITING,
        attempts=max(0, job.attempts - 1),
        snoozes=job.snoozes,
        run_at=job.run_at,
        error=None,
        report=outcome.report if outcome.report is not None else job.report,
        finished_at=None,
        dedup_key=job.dedup_key,
        ended_at=now,
        worker=worker,
        children=outcome.children,
        awaits=outcome.awaits,
    )


def waits_for_children(change: Patch, written: Job | None) -> bool:
    """Whether the store must give ``written`` its children's edges: ``change`` applied and
    left the job ``waiting`` (a patch of an attempt that lost its job leaves nothing)."""
    return written is not None and change.status is Status.WAITING


def awaited_children(
    inserted: Iterable[Job], awaits: Sequence[uuid.UUID], statuses: Mapping[uuid.UUID, Status]
) -> list[Ended]:
    """What a parent waits for: the children inserted with its outcome (queued: none has
    ended), then those its attempt enqueued at once, each as it is now (``statuses``, read under
    their row locks; one gone — purged, deleted — counts as ended ``cancelled``), each once."""
    from jobs_core.waits import Ended

    awaited: dict[uuid.UUID, Ended] = {}
    for child in inserted:
        awaited.setdefault(child.id, Ended(child.id, child.status))
    for child_id in awaits:
        status = statuses.get(child_id, Status.CANCELLED)
        awaited.setdefault(child_id, Ended(child_id, status))
    return list(awaited.values())
