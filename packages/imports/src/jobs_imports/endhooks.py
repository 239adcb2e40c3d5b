"""The end hooks of the import job types: the import ends ``failed`` or ``cancelled`` when its
job does (``on_fail`` / ``on_cancel`` of ``import_csv`` and ``import_api``)."""

from __future__ import annotations

import logging
import uuid

from jobs_core import Job
from jobs_postgres.errors import unavailable_as_store_error
from sqlalchemy import func, update

from jobs_imports.service import ImportsService
from jobs_imports.tables import imports

__all__ = ["mark_import_cancelled", "mark_import_failed"]

log = logging.getLogger("jobs.imports")


def mark_import_failed(service: ImportsService, job: Job) -> None:
    """``on_fail`` of ``import_csv`` and ``import_api``: the import is failed, with the job's
    error and report.

    The rows already written stay, with the job's checkpoint: a manual retry of the job resumes
    where it stopped. Readers count the rows of ``done`` imports only (a running import has
    partial rows too).
    """
    _mark_import_ended(service, job, "failed", job.error or "the import job failed")


def mark_import_cancelled(service: ImportsService, job: Job) -> None:
    """``on_cancel`` of the import types: the import is cancelled (queued or running when its job
    was), never left ``pending`` or ``running``; as after a failure, the rows it wrote stay and
    a retry of the job resumes from its checkpoint."""
    _mark_import_ended(service, job, "cancelled", job.error)


def _mark_import_ended(service: ImportsService, job: Job, status: str, error: str | None) -> None:
    """The import of ``job`` ends ``status`` (unless it is done), with ``error`` and the job's
    report. Run at least once per transition (an end hook): writing it again changes nothing."""
    raw_id = job.payload.get("import_id")
    try:
        import_id = uuid.UUID(str(raw_id))
    except ValueError:
        log.warning("end hook of job %s: payload has no valid import_id", job.id)
        return
    with unavailable_as_store_error(), service.engine.begin() as conn:
        conn.execute(
            update(imports)
            .where(
                imports.c.id == import_id,
                imports.c.org_id == job.org_id,
                imports.c.kind == ("api" if job.type == "import_api" else "csv"),
                imports.c.status != "done",
            )
            .values(
                status=status,
                error=error,
                report=dict(job.report) if job.report is not None else None,
                finished_at=func.now(),
            )
        )
