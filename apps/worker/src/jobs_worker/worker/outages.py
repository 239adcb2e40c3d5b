"""The retries of the worker's store calls through an outage: a backoff and its log lines.

Which error is an outage is the core's rule (:func:`jobs_core.errors.is_outage`: the adapter's
``StoreUnavailable``), and so is the backoff (:func:`jobs_core.retry.exponential`); this module
only keeps count and logs (``store.unavailable``, ``worker.error``, ``store.recovered``).
"""

from __future__ import annotations

import logging

from jobs_core.errors import is_outage
from jobs_core.observe import Observer
from jobs_core.retry import exponential
from jobs_core.runner import short_error

from jobs_worker.logs import log_event

log = logging.getLogger("jobs.worker")


class Retry:
    """Exponential backoff of one loop's store calls, logging the outage and the recovery."""

    def __init__(self, operation: str, initial_s: float, cap_s: float, observer: Observer) -> None:
        self.operation = operation
        self._observer = observer
        self._delay = exponential(initial_s, 2.0, cap_s)
        self.failures = 0

    def failed(self, error: BaseException) -> float:
        """Log ``error`` and return how long to wait before the next try."""
        self.failures += 1
        delay = self._delay(self.failures)
        outage = is_outage(error)
        if outage and self.failures == 1:
            self._observer.outage_began()
        log_event(
            log,
            logging.WARNING if outage else logging.ERROR,
            "store.unavailable" if outage else "worker.error",
            op=self.operation,
            error=short_error(error),
            failures=self.failures,
            retry_in_s=round(delay, 3),
            exc_info=not outage,
        )
        return delay

    def succeeded(self) -> None:
        """Reset the backoff after a call went through."""
        if self.failures:
            log_event(log, logging.INFO, "store.recovered", op=self.operation, after=self.failures)
            self.failures = 0
