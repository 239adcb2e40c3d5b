"""Rows of ``jobs`` and the store's values: a job written back after a locked read, and the JSON
documents the statements take (a batch of patches, a report or progress document). A row read
back into a :class:`~jobs_core.Job`: :mod:`jobs_postgres.job_rows`."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobs_core import codec, domain, history
from jobs_core.domain import Job, Patch
from sqlalchemy import Connection

from jobs_postgres import sql
from jobs_postgres.job_rows import job_from_row


def locked_job(conn: Connection, org_id: str, job_id: uuid.UUID) -> Job | None:
    row = conn.execute(sql.GET_FOR_UPDATE, {"org_id": org_id, "id": job_id}).first()
    return None if row is None else job_from_row(row)


_SAVED = (
    "status",
    "attempts",
    "dedup_key",
    "run_at",
    "error",
    "started_at",
    "finished_at",
    "cancel_requested_at",
    "lease",
    "snoozes",
)
"""The columns sql.SAVE writes: every column an admin transition of the domain changes."""


def save_job(conn: Connection, before: Job, after: Job, now: datetime) -> Job:
    """Write ``after`` (the domain's transition of the locked row ``before`` at ``now``) back,
    with the end hook's marker the core gives for it (:func:`jobs_core.domain.end_hook_due`: no
    worker ended the job)."""
    changed = {
        f.name for f in dataclasses.fields(Job) if getattr(before, f.name) != getattr(after, f.name)
    }
    if not changed <= set(_SAVED):  # a new domain rule this statement does not know yet
        raise RuntimeError(f"sql.SAVE does not write {sorted(changed - set(_SAVED))}")
    params: dict[str, Any] = {name: getattr(after, name) for name in _SAVED}
    params["status"] = after.status.value
    params["id"] = after.id
    params["hook_due_at"] = domain.end_hook_due(after.status, now, by_worker=False)
    return job_from_row(conn.execute(sql.SAVE, params).one())


def has_sweep_patches(patches: Sequence[Patch]) -> bool:
    """Whether a batch holds sweep patches (``seen_at``: taken only if their rows are free)."""
    return any(change.seen_at is not None for change in patches)


def patches_json(patches: Sequence[Patch]) -> str:
    """The ``:outcomes`` parameter of the finish: each patch's columns as given, ``ord`` its
    input index (claims._OUTCOME), with the attempt's record (:func:`jobs_core.history.record_of`,
    numbered in SQL), sorted by job id: the finish locks its rows in the order it
    reads them (decision 0027). Only the report is a handler's document (normalised by the
    codec); the rest is text, numbers and nulls built here, encoded as they are.

    The same attempt twice in a batch: the first patch wins, as applied in order (after it the
    job is no longer running under that lease)."""
    first: dict[uuid.UUID, tuple[int, Patch]] = {}
    for ord_, change in enumerate(patches):
        first.setdefault(change.ref.job_id, (ord_, change))
    instants: dict[datetime, str] = {}  # a batch's patches share their instants: each written once

    def instant(value: datetime) -> str:
        text = instants.get(value)
        if text is None:
            text = instants[value] = value.isoformat()
        return text

    batch = []
    for job_id in sorted(first):
        ord_, change = first[job_id]
        ref = change.ref
        # A key left out is NULL to jsonb_to_recordset: only the columns with a value are sent
        # (a done job's patch has seven of its seventeen), which is a third of the encoding.
        item: dict[str, Any] = {
            "ord": ord_,
            "id": str(job_id),
            "lease": str(ref.lease),
            "status": change.status.value,
            "attempts": change.attempts,
            "snoozes": change.snoozes,
            "run_at": instant(change.run_at),
        }
        if change.error is not None:
            item["error"] = change.error
        if change.report is not None:
            item["report"] = codec.document(change.report)
        if change.finished_at is not None:
            item["finished_at"] = instant(change.finished_at)
        if change.dedup_key is not None:
            item["dedup_key"] = change.dedup_key
        if change.seen_at is not None:
            item["seen_at"] = instant(change.seen_at)
        if change.hook_due_at is not None:
            item["hook_due_at"] = instant(change.hook_due_at)
        record = history.record_of(change, 0)  # numbered by the statement (claims._ATTEMPTED)
        if record is not None:
            item["ended_at"] = instant(record.ended_at)
            item["attempt_outcome"] = record.outcome.value
            if record.worker is not None:
                item["worker"] = record.worker
            if record.traceback is not None:
                item["traceback"] = record.traceback
        batch.append(item)
    return codec.encode_plain(batch)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def document_json(document: object) -> str:
    """A report or progress document as JSON (:mod:`jobs_core.codec`: never refused; what a
    payload would refuse is kept as text)."""
    return codec.encode_document(document)
