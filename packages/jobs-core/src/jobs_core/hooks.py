"""End hooks: a module's ``on_fail`` / ``on_cancel``, run at least once after its job ends
failed or cancelled (docs/decisions/0025-end-hooks-and-private-checkpoint.md).

The statement that ends a job ``failed`` or ``cancelled`` also sets a durable marker on its row
(the hook is due). The worker that ended the job runs the hook at once and clears the marker; a
job ended elsewhere (the API or the CLI cancelling a queued job, a sweep in a process that does
not know the type) or whose worker crashed before clearing it is picked up by the next pass of
any worker that registers the type (:meth:`jobs_core.JobService.run_end_hooks`). A hook may thus
run more than once for one ending: write it idempotent.
"""

from __future__ import annotations

import logging

from jobs_core.domain import Job, Status
from jobs_core.registry import Registry

log = logging.getLogger("jobs.hooks")

HOOK_RETRY_S = 60.0
"""How long a hook taken by a worker is not taken by another (the worker ending a job is given
as long to run its hook before the others may): a hook whose worker died, or that raised, runs
again this much later."""

ENDED_WITH_HOOK = frozenset({Status.FAILED, Status.CANCELLED})
"""The endings that have a hook (``on_fail``, ``on_cancel``)."""


def call_end_hook(registry: Registry, job: Job) -> bool:
    """Run the hook of ``job``'s ending (``on_fail`` for failed, ``on_cancel`` for cancelled).

    True when the hook is settled: it ran without raising, or the type declares none for this
    ending. False when it must run again later: it raised (logged, never raised here), or the
    type is not registered in this process (another one may know it).
    """
    if job.status not in ENDED_WITH_HOOK:
        return True
    hook_name = "on_fail" if job.status is Status.FAILED else "on_cancel"
    if job.type not in registry:
        log.warning(
            "%s skipped: type %s is not registered here (job %s)", hook_name, job.type, job.id
        )
        return False
    hook = getattr(registry.get(job.type), hook_name)
    if hook is None:
        return True
    try:
        hook(job)
    except Exception:
        log.exception(
            "%s of %s raised for job %s (it runs again later)", hook_name, job.type, job.id
        )
        return False
    return True
