"""Helpers of the Imports tests: uploads, and running queued jobs in this process.

:func:`run_next` is what a worker slot does for one job — claim, build the context whose progress
goes to the store under the attempt's lease, run the handler through the core's runner, record
the outcome (``on_fail`` included) — without threads, so a test decides what runs when. They are
the public testing kit (``jobs_core.testing.JobsHarness``) on the module's own service: what a
module author outside this repository uses.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from jobs_core import Job, JobContext, Status
from jobs_core.testing import JobsHarness
from sqlalchemy import text

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import ImportView, SiteTarget

ORG = "org-imports"
ORG_B = "org-other"

IMPORTS_TABLES = "import_rows, imports, pages, import_api_sources, site_targets"
"""The Imports chain's tables, emptied before each Imports test."""

HEADER = "Page,Query,Clicks,Impressions,CTR,Position,Date\n"


def upload(
    module: ImportsModule,
    target: SiteTarget,
    content: bytes | str,
    name: str = "export.csv",
    *,
    force: bool = False,
) -> ImportView:
    """Upload ``content`` as a CSV for ``target`` (its org), as the API would."""
    data = content.encode() if isinstance(content, str) else content
    return module.service.create_import(
        target.org_id, target.id, io.BytesIO(data), name, force=force
    )


def harness(module: ImportsModule) -> JobsHarness:
    """The public testing kit (``jobs_core.testing``) on the module's own job service: its
    PostgreSQL store, its registry and its clock."""
    return JobsHarness(service=module.service.jobs)


def context_for(module: ImportsModule, job: Job) -> JobContext:
    """The context a worker gives a claimed job: progress saved under the attempt's lease."""
    return harness(module).context(job)


def run_job(module: ImportsModule, job: Job, ctx: JobContext | None = None) -> Job:
    """Run a claimed job's handler and record its outcome; the finished (or requeued) job."""
    kit = harness(module)
    kit.run(job, ctx)
    assert kit.last_recorded is not None, f"the attempt of {job.id} lost its lease"
    return kit.last_recorded


def claim_one(module: ImportsModule, type_name: str | None = None) -> Job | None:
    """Claim the oldest queued job (of ``type_name`` if given)."""
    return harness(module).claim(type_name)


def run_next(module: ImportsModule, type_name: str | None = None) -> Job | None:
    """Claim and run one queued job; None when the queue (of that type) is empty."""
    return harness(module).run_next(type_name)


def drain(module: ImportsModule, limit: int = 100) -> list[Job]:
    """Run queued jobs until none is left; the jobs run, in order."""
    ran: list[Job] = []
    kit = harness(module)
    while (job := kit.run_next()) is not None:
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
