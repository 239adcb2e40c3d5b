"""The Prometheus metrics of jobs (docs/operations.md): one definition of each, in the
process-wide registry of ``prometheus_client``, for the API (``GET /metrics``) and the worker
(``--metrics-port``); a process that runs both (``jobs dev``) shares them.

Every name has the one ``jobs_`` prefix, times are in seconds, counters end in ``_total``; the
labels are bounded: a job type, an attempt's outcome, a live job's state (never a job or an
org). They are counted in Python after a store call returned (:class:`PrometheusObserver`, the
:class:`jobs_core.observe.Observer` of a service) or read at scrape time (the slots, the open
streams, the live jobs: :func:`active_jobs`); nothing is added to a statement.
"""

from __future__ import annotations

from collections import Counter as Counter_
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobs_core import Job
from jobs_core.history import Ended
from jobs_core.observe import ACTIVE_STATES
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs_metrics.batched import TypeHistogram

# Buckets for an attempt, a wait in the queue: from a millisecond to a day.
LONG_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
    *(3600, 4 * 3600, 86400),
)
# Buckets for one round trip of the store.
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)

ENQUEUED = Counter("jobs_enqueued", "Jobs created by this process (a dedup hit is not).", ["type"])
FINISHED = Counter(
    "jobs_finished",
    "Attempts ended, by what became of the attempt (done, failed, cancelled, retrying, "
    "snoozed, handed_back, lost).",
    ["type", "outcome"],
)
ATTEMPT_DURATION = TypeHistogram(
    "jobs_attempt_duration_seconds",
    "How long an attempt ran, from its claim to its end.",
    LONG_BUCKETS,
)
QUEUE_WAIT = TypeHistogram(
    "jobs_queue_wait_seconds",
    "How long a job waited to start: from when it was due (its run_at: the enqueue, a "
    "retry's backoff, a snooze) to its claim.",
    LONG_BUCKETS,
)
CLAIM_DURATION = Histogram(
    "jobs_claim_duration_seconds",
    "One claim's round trip to the store (a claim that finishes nothing).",
    buckets=STORE_BUCKETS,
)
FINISH_DURATION = Histogram(
    "jobs_finish_duration_seconds",
    "One write of ended attempts (with the claim it carries, if any): its round trip.",
    buckets=STORE_BUCKETS,
)
STORE_OUTAGES = Counter(
    "jobs_store_outages",
    "Outages of the store this worker went through (the first failed call of each).",
)
SLOTS_BUSY = Gauge("jobs_worker_slots_busy", "Slots of this worker running a handler now.")
SLOTS = Gauge("jobs_worker_slots", "Slots of this worker (its concurrency).")
EVENT_STREAMS = Gauge("jobs_event_streams_open", "Event streams this API process holds open.")

_ACTIVE_HELP = {
    "queued": "Queued jobs that are due (run_at reached), by type, all orgs.",
    "scheduled": "Queued jobs due later (a run_at, a retry's backoff, a snooze), by type.",
    "running": "Running jobs, by type, all orgs.",
    "waiting": "Jobs waiting for others to end (dependencies, a batch), by type, all orgs.",
}


class PrometheusObserver:
    """The worker service's :class:`jobs_core.observe.Observer`: counts into the metrics.

    Per call, not per job: a counter's labelled child is looked up once per type (and outcome)
    and kept (``labels()`` takes the metric's lock and builds its key), each is incremented
    once by the call's count, and the per-job histograms take their lock once per call
    (:class:`~jobs_metrics.batched.TypeHistogram`). Each of these was a per-job cost of the
    drain with metrics on (issue 24's A/B)."""

    def __init__(self) -> None:
        self._enqueued: dict[str, Any] = {}
        self._finished: dict[tuple[str, str], Any] = {}

    def enqueued(self, jobs: Sequence[Job]) -> None:
        """Count the jobs created, by type."""
        counts = Counter_(job.type for job in jobs)
        children = self._enqueued
        for job_type, count in counts.items():
            child = children.get(job_type)
            if child is None:
                child = children[job_type] = ENQUEUED.labels(job_type)
            child.inc(count)

    def claimed(self, jobs: Sequence[Job], seconds: float | None) -> None:
        """The claim's round trip, and each job's wait since it was due."""
        if seconds is not None:
            CLAIM_DURATION.observe(seconds)
        if jobs:
            QUEUE_WAIT.observe_each(
                (job.type, (job.started_at - job.run_at).total_seconds())
                for job in jobs
                if job.started_at is not None
            )

    def finished(self, ended: Sequence[Ended], seconds: float | None) -> None:
        """The write's round trip, and each ended attempt's outcome and duration."""
        if seconds is not None:
            FINISH_DURATION.observe(seconds)
        if not ended:
            return
        counts = Counter_((one.type, one.outcome.value) for one in ended)
        children = self._finished
        for key, count in counts.items():
            child = children.get(key)
            if child is None:
                child = children[key] = FINISHED.labels(*key)
            child.inc(count)
        ATTEMPT_DURATION.observe_each((one.type, one.duration_s) for one in ended)

    def outage_began(self) -> None:
        """Count one outage of the store."""
        STORE_OUTAGES.inc()


def watch_slots(busy: Callable[[], int], total: int) -> None:
    """Read the busy slots at scrape time (``busy`` is called then, never on the hot path)."""
    SLOTS.set(total)
    SLOTS_BUSY.set_function(busy)


def serve(port: int, host: str) -> int:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread; the port bound (``0``: any
    free one)."""
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_address[1])


def watch_streams(open_streams: Callable[[], int]) -> None:
    """Read the open event streams at scrape time."""
    EVENT_STREAMS.set_function(open_streams)


class _ActiveJobs(Collector):
    """``jobs_queued``, ``jobs_scheduled``, ``jobs_running``, ``jobs_waiting`` by type, from
    one read's counts."""

    def __init__(self, counts: Mapping[tuple[str, str], int]) -> None:
        self._counts = counts

    def collect(self) -> list[GaugeMetricFamily]:
        """One family per state; a type with no job in a state is absent from it."""
        families = {
            state: GaugeMetricFamily(f"jobs_{state}", _ACTIVE_HELP[state], labels=["type"])
            for state in ACTIVE_STATES
        }
        for (job_type, state), count in sorted(self._counts.items()):
            families[state].add_metric([job_type], count)
        return list(families.values())


def exposition(active: Mapping[tuple[str, str], int] | None = None) -> bytes:
    """This process's metrics in the text format, with the gauges of the live jobs when
    ``active`` (``OperatorReads.active_counts``, read by the caller at scrape time) is given."""
    text = generate_latest(REGISTRY)
    if active is None:
        return text
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ActiveJobs(active))
    return text + generate_latest(registry)
