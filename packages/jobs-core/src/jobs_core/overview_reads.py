"""The Overview's use cases: the reads of :class:`jobs_core.ports.Overview` shaped by the rules of
:mod:`jobs_core.overview`. A class of its own, over the one role, so that a deployment may serve
these reads from another store than the writes' (a read replica: the API builds it in one place,
``jobs_api.overview.overview_reads``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jobs_core.domain import Job, Status
from jobs_core.overview import (
    LOOKUP_CANDIDATES,
    LookupKind,
    Series,
    TypeCounts,
    Window,
    parse_lookup,
    series_of,
    type_counts_of,
)
from jobs_core.ports import Clock, Overview
from jobs_core.workers import WorkerInfo, WorkerRegistry


class OverviewSource(Overview, WorkerRegistry, Protocol):
    """What the Overview reads: the Overview role and the live workers (every store is one)."""


@dataclass(frozen=True, slots=True)
class Found:
    """What a lookup found: the jobs (none, one, or the candidates of an ambiguous text) and
    whether there were more than :data:`~jobs_core.overview.LOOKUP_CANDIDATES`."""

    jobs: list[Job]
    more: bool = False


class OverviewReads:
    """An org's operations view over a store playing the Overview role."""

    def __init__(
        self, store: OverviewSource, clock: Clock, *, workers: OverviewSource | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        # The worker registry's read forgets silent workers (a write): a store that may be a
        # read-only standby reads everything else, the primary the workers.
        self._workers = workers if workers is not None else store

    def on(self, store: OverviewSource) -> OverviewReads:
        """The same reads over ``store`` (a standby's), the workers still read here."""
        return OverviewReads(store, self.clock, workers=self._workers)

    def type_counts(
        self,
        org_id: str,
        statuses: frozenset[Status] | None = None,
        type_name: str | None = None,
    ) -> list[TypeCounts]:
        """The org's jobs per type and status, following the list's filters."""
        return type_counts_of(self.store.type_counts(org_id, statuses, type_name))

    def series(self, org_id: str, window: Window) -> Series:
        """Every type's buckets over ``window`` ending now (:func:`jobs_core.overview.
        series_of`)."""
        now = self.clock.now()
        return series_of(window, now, self.store.series(org_id, window, now))

    def workers(self) -> list[WorkerInfo]:
        """The live workers, oldest first (an operator's read: they serve every org)."""
        return list(self._workers.live_workers(self.clock.now()))

    def lookup(self, org_id: str, raw: str) -> Found:
        """The org's jobs that ``raw`` names (:func:`jobs_core.overview.parse_lookup`; its
        ValueError for a text that names no job): the job of a full id, or every candidate of a
        prefix or short id, by id."""
        lookup = parse_lookup(raw)
        limit = LOOKUP_CANDIDATES + 1
        if lookup.kind is LookupKind.ID or lookup.kind is LookupKind.PREFIX:
            jobs = self.store.find_by_prefix(org_id, lookup.digits, limit)
        else:
            suffixed = self.store.find_by_short_id(org_id, lookup.digits, limit)
            prefixed = self.store.find_by_prefix(org_id, lookup.digits, limit)
            unique = {job.id: job for job in [*suffixed, *prefixed]}
            jobs = [unique[key] for key in sorted(unique)]
        return Found(jobs[:LOOKUP_CANDIDATES], more=len(jobs) > LOOKUP_CANDIDATES)
