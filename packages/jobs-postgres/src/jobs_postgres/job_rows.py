"""A row of ``jobs`` and the :class:`~jobs_core.Job` it is: the columns every statement returns,
in the order of Job's fields, and the row read back.

Plain Python over the core's model, no SQLAlchemy: the store's statements (:mod:`jobs_postgres.sql`,
:mod:`jobs_postgres.claims`, ...) and the reads on psycopg alone (:mod:`jobs_postgres.reads`, the
CLI's ``jobs ls`` and ``jobs show``: decision 0049) return their jobs in this one shape.
``jobs_postgres.sql`` checks that the table's columns, its private ones aside, are these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jobs_core.domain import DedupScope, Job, Status
from jobs_core.listing import Elided

COLUMNS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(Job))
"""The ``jobs`` columns every statement returns a job with, in the order of Job's fields (see
:func:`job_from_row`); the table's other columns are private (``sql.PRIVATE_COLUMNS``)."""

STATUS_OF = {status.value: status for status in Status}
_SCOPE = {scope.value: scope for scope in DedupScope}
_STATUS_AT = COLUMNS.index("status")
_SCOPE_AT = COLUMNS.index("dedup_scope")


def columns(alias: str) -> str:
    """The returned columns of the job rows ``alias``, in :data:`COLUMNS` order."""
    return ", ".join(f"{alias}.{name}" for name in COLUMNS)


def job_from_row(row: Sequence[Any]) -> Job:
    """A ``jobs`` row (columns in :data:`COLUMNS` order) as a :class:`Job`.

    Positional: the claim and the finish build one per job on the worker's hot path, where a
    dict of keyword arguments per row showed in the profiles.
    """
    if len(row) != len(COLUMNS):
        raise ValueError(f"a jobs row has {len(COLUMNS)} columns, not {len(row)}")
    values = list(row)
    values[_STATUS_AT] = STATUS_OF[values[_STATUS_AT]]
    values[_SCOPE_AT] = _SCOPE[values[_SCOPE_AT]]
    return Job(*values)


LISTED_SIZES: tuple[str, ...] = ("payload", "progress", "report")
"""The columns a bounded list leaves out when too large (``jobs_core.listing.LISTED_FIELDS``)."""


def listed_row(row: Sequence[Any]) -> Job:
    """A row of a bounded list (:func:`jobs_postgres.reads.list_jobs` with ``field_bytes``):
    the job, with its values too large to list as :class:`~jobs_core.listing.Elided`."""
    width = len(COLUMNS)
    job = job_from_row(row[:width])
    elided = {
        name: Elided(int(size))
        for name, size in zip(LISTED_SIZES, row[width:], strict=True)
        if size is not None
    }
    return dataclasses.replace(job, **elided) if elided else job  # type: ignore[arg-type]
