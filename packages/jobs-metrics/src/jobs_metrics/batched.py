"""A histogram by job type that takes a call's observations under one lock (the per-job
histograms: an attempt's run time, a job's wait in the queue).

``prometheus_client``'s :class:`~prometheus_client.Histogram` takes two locks per observation
(its sum and its bucket) and has no call for many at once; the worker's completer observes each
job of a batch, and those locks were most of the metrics' cost on the drain (issue 24's A/B).
This collector keeps plain counts per bucket and takes its lock once per call; the library
still does the rest: the families it yields at scrape time are its
:class:`~prometheus_client.core.HistogramMetricFamily`, exposed by its registry as any of its
histograms (``_bucket`` with ``le``, ``_count``, ``_sum``).
"""

from __future__ import annotations

import itertools
import math
import threading
from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector


class TypeHistogram(Collector):
    """A histogram labelled by ``type`` (the only label), registered in ``registry``.

    ``buckets``: the upper bounds, increasing (``+Inf`` is added). Observations below zero
    count as zero (a clock step back must not make a negative duration).
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        buckets: Iterable[float],
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        bounds = [float(bound) for bound in buckets]
        if any(later <= earlier for earlier, later in itertools.pairwise(bounds)):
            raise ValueError(f"{name}: the buckets must increase: {bounds}")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self._name = name
        self._documentation = documentation
        self._bounds = tuple(bounds)
        self._labels = tuple(_go_float(bound) for bound in bounds)
        self._lock = threading.Lock()
        self._series: dict[str, list[float]] = {}  # type -> counts per bucket, then the sum
        registry.register(self)

    def observe_each(self, observations: Iterable[tuple[str, float]]) -> None:
        """Count each ``(type, seconds)`` in its bucket: one lock for all of them."""
        bounds, series, width = self._bounds, self._series, len(self._bounds)
        with self._lock:
            for job_type, value in observations:
                counts = series.get(job_type)
                if counts is None:
                    counts = series[job_type] = [0.0] * (width + 1)
                seconds = value if value > 0.0 else 0.0
                counts[bisect_left(bounds, seconds)] += 1
                counts[width] += seconds

    def describe(self) -> list[HistogramMetricFamily]:
        """The family, without samples (what the registry checks names against)."""
        return [HistogramMetricFamily(self._name, self._documentation, labels=["type"])]

    def collect(self) -> list[HistogramMetricFamily]:
        """The cumulative buckets, the count and the sum of each type seen."""
        with self._lock:
            snapshot = {job_type: list(counts) for job_type, counts in self._series.items()}
        family = HistogramMetricFamily(self._name, self._documentation, labels=["type"])
        width = len(self._bounds)
        for job_type, counts in sorted(snapshot.items()):
            cumulative, buckets = 0.0, []
            for label, count in zip(self._labels, counts[:width], strict=True):
                cumulative += count
                buckets.append((label, cumulative))
            family.add_metric([job_type], buckets, counts[width])
        return [family]


def _go_float(bound: float) -> str:
    """A bucket's ``le`` as the text format writes it (``+Inf``, ``0.25``, ``1.0``)."""
    return "+Inf" if bound == math.inf else repr(bound)
