"""What the Imports use cases read and refuse: site targets, imports and their views, reconcile
events, and the errors of :mod:`jobs_imports.service` (which re-exports them)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from jobs_core import Job
from sqlalchemy import RowMapping


class ImportsError(Exception):
    """An Imports use case refused a request."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class SiteTargetNotFound(ImportsError):
    """No such site target (or it belongs to another organization, which is the same thing)."""


class ImportNotFound(ImportsError):
    """No such import (or it belongs to another organization, which is the same thing)."""


class SiteTargetExists(ImportsError):
    """The organization already has a site target with this base URL."""


class InvalidSiteTarget(ImportsError):
    """The site target's name or base URL is not usable."""


class InvalidUpload(ImportsError):
    """The uploaded file's name or metadata is not usable (checked before the file is stored)."""


MAX_FILE_NAME_LENGTH = 255
"""The longest file name kept for display (a longer one is cut)."""


@dataclass(frozen=True, slots=True)
class SiteTarget:
    """A site whose search data is imported."""

    id: uuid.UUID
    org_id: str
    name: str
    base_url: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredImport:
    """A row of ``imports``: one uploaded file (``kind`` csv) or one date range fetched from the
    site target's API source (``kind`` api: no file, empty path and hash), its status and
    counts."""

    id: uuid.UUID
    org_id: str
    site_target_id: uuid.UUID
    kind: str
    file_path: str
    file_sha256: str
    file_size: int
    original_name: str | None
    status: str
    job_id: uuid.UUID | None
    rows_read: int
    rows_inserted: int
    rows_skipped: int
    rows_errors: int
    report: Mapping[str, Any] | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    date_from: date | None = None
    """The first day an ``api`` import asked its source for (None for a CSV)."""
    date_to: date | None = None
    """The last day (inclusive) an ``api`` import asked for (None for a CSV)."""


@dataclass(frozen=True, slots=True)
class ImportView:
    """An import as a reader sees it: with its job, and the status both say together.

    ``status`` is the import's own, except that an import whose job ended without its hook
    recording it (``on_fail`` / ``on_cancel`` not run yet) reads as the job ended — ``failed``
    with the job's error, or ``cancelled``: a reader never waits on an import nothing will
    finish. ``created`` is False for an upload answered with an earlier import of the same
    content (:meth:`ImportsService.create_import`).
    """

    record: StoredImport
    job: Job | None
    status: str
    error: str | None
    created: bool = True


@dataclass(frozen=True, slots=True)
class ReconcileEvent:
    """One ``map_reconcile`` job of a site target: an event of its Imports tab."""

    job_id: uuid.UUID
    status: str
    mapped: int | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class PagesAdded:
    """What :meth:`ImportsService.add_pages` did."""

    received: int
    added: int
    known: int
    invalid: int
    invalid_samples: list[dict[str, str]] = field(default_factory=list)
    reconcile_job: Job | None = None


def site_target_of(row: RowMapping) -> SiteTarget:
    return SiteTarget(
        id=row["id"],
        org_id=row["org_id"],
        name=row["name"],
        base_url=row["base_url"],
        created_at=row["created_at"],
    )


def stored_import_of(row: RowMapping) -> StoredImport:
    return StoredImport(**{name: row[name] for name in StoredImport.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class SearchTotals:
    """A site target's search data as one consistent set (the view ``site_search_rows``): its
    records, one per key (url, query, date, country, device) from its most recent done import,
    and their summed clicks and impressions."""

    rows: int
    clicks: int
    impressions: int
