"""Helpers of the Imports tests: uploads, and running queued jobs in this process.

:func:`run_next` is what a worker slot does for one job — claim, build the context whose progress
goes to the store under the attempt's lease, run the handler through the core's runner, record
the outcome (``on_fail`` included) — without threads, so a test decides what runs when.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobs_core import Job, JobContext, Status
from jobs_core.runner import execute
from sqlalchemy import text

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import ImportView, SiteTarget

ORG = "org-imports"
ORG_B = "org-other"

HEADER = "Page,Query,Clicks,Impressions,CTR,Position,Date\n"


def upload(
    module: ImportsModule, target: SiteTarget, content: bytes | str, name: str = "export.csv"
) -> ImportView:
    """Upload ``content`` as a CSV for ``target`` (its org), as the API would."""
    data = content.encode() if isinstance(content, str) else content
    return module.service.create_import(target.org_id, target.id, io.BytesIO(data), name)


def context_for(module: ImportsModule, job: Job) -> JobContext:
    """The context a worker gives a claimed job: progress saved under the attempt's lease."""
    store = module.service.store
    clock = module.service.clock

    def save(document: Mapping[str, Any]) -> bool:
        return store.save_progress(job.ref, dict(document), clock.now())

    return JobContext(job, progress_sink=save, now=clock.now)


def run_job(module: ImportsModule, job: Job, ctx: JobContext | None = None) -> Job:
    """Run a claimed job's handler and record its outcome; the finished (or requeued) job."""
    service = module.service.jobs
    job_type = service.registry.get(job.type)
    outcome = execute(job_type, ctx or context_for(module, job), service.clock.now())
    finished = service.complete(job.ref, outcome)
    assert finished is not None, f"the attempt of {job.id} lost its lease"
    return finished


def claim_one(module: ImportsModule, type_name: str | None = None) -> Job | None:
    """Claim the oldest queued job (of ``type_name`` if given)."""
    service = module.service.jobs
    types = [type_name] if type_name else service.registry.names()
    claimed = service.store.claim(1, service.clock.now(), types)
    return claimed[0] if claimed else None


def run_next(module: ImportsModule, type_name: str | None = None) -> Job | None:
    """Claim and run one queued job; None when the queue (of that type) is empty."""
    job = claim_one(module, type_name)
    return None if job is None else run_job(module, job)


def drain(module: ImportsModule, limit: int = 100) -> list[Job]:
    """Run queued jobs until none is left; the jobs run, in order."""
    ran: list[Job] = []
    while (job := run_next(module)) is not None:
        ran.append(job)
        assert len(ran) <= limit, "the queue does not drain"
    return ran


def job_of(module: ImportsModule, org_id: str, job_id: Any) -> Job:
    """A job as the store has it now."""
    return module.service.jobs.get(org_id, job_id)


def rows_of(module: ImportsModule, import_id: Any) -> list[tuple[Any, ...]]:
    """The imported rows of an import, by line: (line, url, normalized, query, clicks, impr.,
    ctr, position, date)."""
    with module.service.engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                text(
                    "SELECT line_no, url, normalized_url, query, clicks, impressions, ctr, "
                    "position, date FROM import_rows WHERE import_id = :id ORDER BY line_no"
                ),
                {"id": import_id},
            )
        ]


def unmapped_matching(module: ImportsModule) -> int:
    """Rows that match a page of their target but are not mapped (the invariant says 0)."""
    with module.service.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM import_rows r JOIN pages p "
                    "ON p.site_target_id = r.site_target_id "
                    "AND p.normalized_url = r.normalized_url "
                    "WHERE r.page_id IS DISTINCT FROM p.id"
                )
            ).scalar_one()
        )


def queued(module: ImportsModule, org_id: str, type_name: str) -> list[Job]:
    """The org's queued jobs of a type."""
    from jobs_core import JobFilter

    return module.service.jobs.list_jobs(
        org_id, JobFilter(statuses=frozenset({Status.QUEUED}), type=type_name, limit=1000)
    )
