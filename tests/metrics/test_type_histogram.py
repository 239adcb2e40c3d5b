"""``TypeHistogram`` (the per-job histograms, one lock per call) is exposed exactly as the
library's own ``Histogram`` with the same buckets and observations: same buckets, counts and
sums in the text format, parsed back with the library's parser."""

from __future__ import annotations

import math
import threading

import pytest
from jobs_metrics.batched import TypeHistogram
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 86400)
OBSERVED = [
    ("noop", 0.0),
    ("noop", 0.001),  # on a bound: counted in it (le)
    ("noop", 0.0010001),
    ("noop", 7.5),
    ("fetch", 2.5),
    ("fetch", 100000.0),  # past the last bound: +Inf only
    ("fetch", -0.2),  # a clock step back: counted as zero
]


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_it_exposes_what_the_library_histogram_exposes() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    histogram = TypeHistogram("jobs_wait_seconds", "A wait.", BUCKETS, registry=ours)
    library = Histogram("jobs_wait_seconds", "A wait.", ["type"], buckets=BUCKETS, registry=theirs)
    histogram.observe_each(OBSERVED[:3])
    histogram.observe_each(OBSERVED[3:])
    for job_type, value in OBSERVED:
        library.labels(job_type).observe(max(value, 0.0))
    assert _samples(ours) == _samples(theirs)
    assert _samples(ours)[("jobs_wait_seconds_count", (("type", "fetch"),))] == 3


def test_observations_from_many_threads_are_all_counted() -> None:
    registry = CollectorRegistry()
    histogram = TypeHistogram("jobs_run_seconds", "A run.", BUCKETS, registry=registry)

    def observe() -> None:
        for _ in range(500):
            histogram.observe_each([("t", 0.002)] * 10)

    threads = [threading.Thread(target=observe) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    samples = _samples(registry)
    assert samples[("jobs_run_seconds_count", (("type", "t"),))] == 20000
    assert math.isclose(samples[("jobs_run_seconds_sum", (("type", "t"),))], 40.0)


def test_buckets_that_do_not_increase_are_refused() -> None:
    with pytest.raises(ValueError, match="must increase"):
        TypeHistogram("jobs_bad_seconds", "Bad.", (1, 0.5), registry=CollectorRegistry())
