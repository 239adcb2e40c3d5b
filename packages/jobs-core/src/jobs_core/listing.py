"""Listed jobs without their large values: a page of jobs stays small whatever the jobs hold.

A job's ``payload``, ``progress`` and ``report`` may each be up to a request body (1 MiB) or
more; a page of 200 such jobs was 200 MB read, parsed and serialized by the API for one request.
A read that sets :attr:`jobs_core.ports.JobFilter.field_bytes` gets each of those values whose
JSON text is larger as an :class:`Elided` instead: an empty mapping that says how large the value
is. The whole job stays readable one at a time (``JobService.get``). Every store applies the
same rule (the memory store with :func:`elide`; PostgreSQL in its list query, so the large
values never leave the database); the contract suite checks they agree.

A listed job that has children (``ctx.enqueue``) shows how far they are: :class:`ChildCounts`,
read for the ids of a page in one grouped read (:meth:`jobs_core.ports.OrgJobs.children_counts`,
decision 0045). A child has *ended* when its status is one of :data:`CHILD_ENDED` (the rule of
:func:`count_children`; PostgreSQL is given the same set).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jobs_core.domain import Job
from jobs_core.states import FINISHED, Status

LISTED_FIELDS: tuple[str, ...] = ("payload", "progress", "report")
"""The fields of a job a bounded read may leave out."""


class Elided(Mapping[str, Any]):
    """A value left out of a listed job because its JSON text is ``size`` bytes, more than the
    read's bound: empty, and never equal to a value."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Elided) and other.size == self.size

    def __hash__(self) -> int:
        return hash((Elided, self.size))

    def __repr__(self) -> str:
        return f"Elided({self.size})"


def json_bytes(value: Any) -> int:
    """The size of ``value``'s JSON text in UTF-8, spaced as PostgreSQL prints ``jsonb``
    (``{"a": 1, "b": [1, 2]}``)."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def elide(job: Job, max_bytes: int | None) -> Job:
    """``job`` with each listed field whose JSON text is larger than ``max_bytes`` left out
    (``max_bytes`` None: the job as it is)."""
    if max_bytes is None:
        return job
    changes: dict[str, Elided] = {}
    for name in LISTED_FIELDS:
        value = getattr(job, name)
        if value is not None and not isinstance(value, Elided):
            size = json_bytes(value)
            if size > max_bytes:
                changes[name] = Elided(size)
    return dataclasses.replace(job, **changes) if changes else job  # type: ignore[arg-type]


def elided_fields(job: Job) -> list[str]:
    """The names of the fields left out of ``job``, in :data:`LISTED_FIELDS` order."""
    return [name for name in LISTED_FIELDS if isinstance(getattr(job, name), Elided)]


CHILD_ENDED: frozenset[Status] = FINISHED
"""The statuses of a child that count as ended: done, failed, cancelled."""


@dataclass(frozen=True, slots=True)
class ChildCounts:
    """A parent's children: how many it has (``total``) and how many have ended (``ended``)."""

    total: int
    ended: int


def count_children(
    jobs: Iterable[Job], parent_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, ChildCounts]:
    """The :class:`ChildCounts` of each of ``parent_ids`` among ``jobs`` (those whose
    ``parent_id`` it is); a parent with no child is absent."""
    wanted = set(parent_ids)
    totals: dict[uuid.UUID, list[int]] = {}
    for job in jobs:
        if job.parent_id is not None and job.parent_id in wanted:
            counts = totals.setdefault(job.parent_id, [0, 0])
            counts[0] += 1
            counts[1] += job.status in CHILD_ENDED
    return {parent: ChildCounts(total, ended) for parent, (total, ended) in totals.items()}
