"""Children on PostgreSQL (``ctx.enqueue``, decision 0038): the statement that inserts them with
their parents' ids, and the finish of a batch of outcomes that carries some.

A batch without children is finished exactly as before (one statement, autocommit). A batch
with children runs the same finish, then inserts the children of the patches that applied and
ended their job ``done`` (:func:`jobs_core.children.children_due`), in one transaction: a worker
killed in between leaves neither the outcome nor the children, and the re-run enqueues them once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from jobs_core.children import children_due
from jobs_core.domain import Job, NewJob, Patch, Status
from sqlalchemy import TextClause, text

from jobs_postgres import bulk, sql

_ARRAYS = """unnest(
        CAST(:ids AS uuid[]), CAST(:org_ids AS text[]), CAST(:types AS text[]),
        CAST(:payloads AS text[]), CAST(:dedup_keys AS text[]), CAST(:dedup_scopes AS text[]),
        CAST(:max_attempts AS int[]), CAST(:run_ats AS timestamptz[]),
        CAST(:priorities AS int[]), CAST(:concurrency_keys AS text[]){arrays}
    ) AS n(
        id, org_id, type, payload, dedup_key, dedup_scope, max_attempts, run_at, priority,
        concurrency_key{names}
    )"""


@cache
def array_statement(parents: bool, traced: bool) -> TextClause:
    """INSERT_MANY from array parameters, with the parents' ids (children: at most
    :data:`jobs_core.children.CHILDREN_MAX`, so array parameters suffice, no COPY) and/or the
    trace contexts (tracing on, decision 0039). Neither: :data:`jobs_postgres.sql.INSERT_MANY`
    itself."""
    if not (parents or traced):
        return sql.INSERT_MANY
    arrays = (", CAST(:parent_ids AS uuid[])" if parents else "") + (
        ", CAST(:trace_contexts AS text[])" if traced else ""
    )
    names = (", parent_id" if parents else "") + (", trace_context" if traced else "")
    source = _ARRAYS.format(arrays=arrays, names=names)
    return text(sql.insert_many_from(source, parents=parents, traced=traced))


Rows = Callable[[TextClause, Mapping[str, Any]], list[Any]]


def has_children(patches: Sequence[Patch]) -> bool:
    """Whether any patch of a batch carries children or waits for them (decision 0043): else
    the plain finish runs."""
    return any(change.children or change.status is Status.WAITING for change in patches)


def is_child(specs: Sequence[NewJob]) -> bool:
    """Whether an enqueue holds a child (its ``parent_id`` must be written)."""
    return any(spec.parent_id is not None for spec in specs)


def array_insert(
    rows: Rows, specs: Sequence[NewJob], ids: Sequence[Any], payloads: Sequence[str], now: datetime
) -> list[Any]:
    """Insert ``specs`` (their ``ids`` and encoded ``payloads``) in one statement of array
    parameters (:func:`array_statement`: their ``parent_id`` written too when they hold
    children, their ``trace_context`` when they carry one); the statement's one row."""
    children = is_child(specs)
    with_context = bulk.traced(specs)
    params = {
        "ids": ids,
        "org_ids": [s.org_id for s in specs],
        "types": [s.type for s in specs],
        "payloads": payloads,
        "dedup_keys": [s.dedup_key for s in specs],
        "dedup_scopes": [s.dedup_scope.value for s in specs],
        "max_attempts": [s.max_attempts for s in specs],
        "run_ats": [s.run_at for s in specs],
        "priorities": [s.priority for s in specs],
        "concurrency_keys": [s.concurrency_key for s in specs],
        "now": now,
    }
    if children:
        params["parent_ids"] = [s.parent_id for s in specs]
    if with_context:
        params["trace_contexts"] = [bulk.context_json(s) for s in specs]
    return rows(array_statement(children, with_context), params)


def children_of(patches: Sequence[Patch], finished: Sequence[Job | None]) -> list[NewJob]:
    """The children the written patches owe (:func:`jobs_core.children.children_due`)."""
    owed: list[NewJob] = []
    for change, written in zip(patches, finished, strict=True):
        owed.extend(children_due(change, written))
    return owed
