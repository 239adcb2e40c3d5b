"""Isolation: a registered Python handler run in a child process, one per attempt.

A type named in ``JOBS_ISOLATED_TYPES`` (default ``import_csv``) keeps its declarations, but
the worker runs its handler through :class:`~jobs_worker.child.SubprocessHandler`: the child,
``python -m jobs_worker.isolated``, rebuilds the same registries the worker built (from the
settings handed over on stdin), calls the handler with a :class:`~jobs_core.JobContext` whose
progress writes travel back as ``JOBCTX:`` lines, whose checkpoint is the one the job had at
claim, and which is cancelled by the SIGTERM the worker sends. A native crash (a segfault in
DuckDB, say) then kills the child, not the worker: the attempt fails with the signal's name
("killed by signal SIGSEGV") and the worker runs the next job.

The outcome crosses back through the exit status: 0 and the report on stdout; 75 for an error
the type declares retryable (the worker re-queues with the type's backoff); 1 otherwise, with the
error on stdout and the traceback on stderr (its tail is in the job's report).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jobs_core import JobContext, JobType, Registry, RetryPolicy
from jobs_core.protocol import ChildRetryable

from jobs_worker.child import ChildSpec, SubprocessHandler, clean_environment
from jobs_worker.logs import log_event

log = logging.getLogger("jobs.isolation")

ISOLATION_KEY = "isolation"

_PASSED_PREFIXES = ("JOBS_", "PYTHON", "HOME", "USER", "TZ", "LANG", "LC_")


@dataclasses.dataclass(frozen=True, slots=True)
class ChildRegistries:
    """What the child needs to rebuild the worker's registries (sent on stdin, never in the
    environment: it holds the database URL)."""

    demo_types: bool
    extra_registries: tuple[str, ...]
    handlers_dir: str | None
    database_url: str | None
    data_dir: str
    shipped_modules: bool
    modules: tuple[str, ...] | None = None
    """``JOBS_MODULES`` as the worker read it (None: every installed module)."""

    def document(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def isolate(
    registry: Registry,
    names: Sequence[str],
    registries: ChildRegistries,
    *,
    kill_grace_s: float = 5.0,
    environ: Mapping[str, str] | None = None,
) -> Registry:
    """A copy of ``registry`` in which the types in ``names`` run in a child process.

    A name that is not registered here is logged and ignored (``import_csv`` is the default and
    a worker without the Imports module is fine)."""
    wanted = set(names)
    missing = sorted(wanted - set(registry.names()))
    if missing:
        log_event(
            log,
            logging.INFO,
            "isolation.skipped",
            types=",".join(missing),
            reason="not registered in this worker",
        )
    source = os.environ if environ is None else environ
    env = clean_environment([name for name in source if name.startswith(_PASSED_PREFIXES)], None)
    out = Registry(registry.name)
    for declared in registry:
        if declared.name in wanted and not isinstance(declared.handler, SubprocessHandler):
            out.register(_isolated(declared, registries, env, kill_grace_s))
        else:
            out.register(declared)
    out.schedules.extend(registry.schedules)  # the modules' declared schedules stay
    return out


def _isolated(
    job_type: JobType, registries: ChildRegistries, env: dict[str, str], kill_grace_s: float
) -> JobType:
    spec = ChildSpec(
        argv=(sys.executable, "-m", "jobs_worker.isolated"),
        cwd=None,
        env=env,
        timeout_s=job_type.timeout_s,
        kill_grace_s=kill_grace_s,
        context_mode=True,
    )
    recipe = registries.document()

    def extra(ctx: JobContext) -> Mapping[str, Any]:
        # the lease: a handler may fence its own writes with the attempt's ref, as import_csv
        # does when it saves its checkpoint in the transaction of its rows
        lease = str(ctx.job.lease) if ctx.job.lease is not None else None
        return {ISOLATION_KEY: recipe, "lease": lease}

    retry = job_type.retry
    if retry.retry_on:
        # the child exits 75 for exactly the errors the type declares retryable
        retry = RetryPolicy(retry_on=(*retry.retry_on, ChildRetryable), backoff=retry.backoff)
    return dataclasses.replace(
        job_type, handler=SubprocessHandler(spec, stdin_extra=extra), retry=retry
    )


def child_registries_from(
    *,
    demo_types: bool,
    extra_registries: Sequence[object],
    handlers_dir: Path | None,
    database_url: str | None,
    data_dir: Path,
    shipped_modules: bool,
    modules: Sequence[str] | None = None,
) -> ChildRegistries:
    """The child's recipe; registries given as objects (not ``module:attribute`` paths) cannot
    cross a process boundary and are left out (their types cannot be isolated)."""
    return ChildRegistries(
        demo_types=demo_types,
        extra_registries=tuple(item for item in extra_registries if isinstance(item, str)),
        handlers_dir=str(handlers_dir) if handlers_dir is not None else None,
        database_url=database_url,
        data_dir=str(data_dir),
        shipped_modules=shipped_modules,
        modules=tuple(modules) if modules is not None else None,
    )
