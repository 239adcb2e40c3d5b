"""The children of the jobs of a listed page, counted on PostgreSQL
(:meth:`jobs_core.ports.OrgJobs.children_counts`, decision 0045): one grouped statement for
every id of the page, whatever its size; the rule of which child has *ended* is the core's
(:data:`jobs_core.listing.CHILD_ENDED`), passed as a parameter.

Index: ``jobs_parent_idx`` (migration 0019: ``(parent_id) WHERE parent_id IS NOT NULL``), one
range per parent of the page; the statement repeats ``parent_id IS NOT NULL`` so that the
planner matches the partial index whatever the plan (a generic plan cannot prove it from
``= ANY(:parents)``). :class:`~jobs_postgres.store.PostgresJobStore` is one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from jobs_core.listing import CHILD_ENDED, ChildCounts
from sqlalchemy import text

from jobs_postgres.connections import StoreConnections

CHILDREN_COUNTS = text(
    "SELECT parent_id, count(*), count(*) FILTER (WHERE status = ANY(:ended)) FROM jobs"
    " WHERE parent_id IS NOT NULL AND parent_id = ANY(:parents) AND org_id = :org_id"
    " GROUP BY parent_id"
)


class ListingRows(StoreConnections):
    """The counts that come with a listed page."""

    def children_counts(
        self, org_id: str, parent_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, ChildCounts]:
        """The org's children of each of ``parent_ids`` that has some, and how many ended."""
        if not parent_ids:
            return {}
        params = {
            "org_id": org_id,
            "parents": list(dict.fromkeys(parent_ids)),
            "ended": sorted(status.value for status in CHILD_ENDED),
        }
        rows = self._read(CHILDREN_COUNTS, params)
        return {parent: ChildCounts(int(total), int(ended)) for parent, total, ended in rows}
