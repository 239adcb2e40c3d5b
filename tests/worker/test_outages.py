"""The worker's backoff through an outage tells the service's observer once per outage (the
``jobs_store_outages_total`` counter), never for an error that is not an outage."""

from __future__ import annotations

from jobs_core import StoreUnavailable
from jobs_worker.worker.outages import Retry

from tests.core.test_observe import Observed


def test_an_outage_is_told_once_however_many_calls_fail_and_again_after_a_recovery() -> None:
    seen = Observed()
    retry = Retry("claim", 0.01, 0.1, seen)
    retry.failed(StoreUnavailable("down"))
    retry.failed(StoreUnavailable("still down"))
    assert seen.outages == 1
    retry.succeeded()
    retry.failed(StoreUnavailable("down again"))
    assert seen.outages == 2


def test_an_error_that_is_not_an_outage_is_not_counted_as_one() -> None:
    seen = Observed()
    Retry("claim", 0.01, 0.1, seen).failed(ValueError("a bug"))
    assert seen.outages == 0
