"""Rate limits per key, the rule (``jobs_core.rates``, decision 0042): declarations refused
with a clear error, the key derived as a concurrency key is, and the sliding window log never
lets more than N starts into any window of P seconds, even with claimers' clocks out of step."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from jobs_core import JobContext, JobType, Registry
from jobs_core.flow import FlowLimit, KeyScope
from jobs_core.rates import RATE_COUNT_MAX, RateLimit, in_window, next_start, recorded, room


def _noop(ctx: JobContext) -> None:
    return None


T0 = datetime(2026, 12, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ((0, 1), "N must be between 1 and 1000, got 0"),
        ((RATE_COUNT_MAX + 1, 1), "N must be between 1 and 1000"),
        ((1.5, 1), "N must be an integer"),
        ((True, 1), "N must be an integer"),
        ((5, 0), "per_seconds must be > 0"),
        ((5, -1), "per_seconds must be > 0"),
        ((5, 86_401), "at most 86400 (one day)"),
        ((5, float("inf")), "per_seconds must be a number"),
        ((5, "1s"), "per_seconds must be a number"),
        ((5,), "must be a pair (N, per_seconds)"),
        ("5/s", "must be a pair (N, per_seconds)"),
    ],
)
def test_a_bad_rate_limit_is_refused_with_what_is_wrong(declared: object, message: str) -> None:
    with pytest.raises(ValueError, match="fetch: rate_limit") as refused:
        JobType("fetch", _noop, concurrency_key="site", rate_limit=declared)  # type: ignore[arg-type]
    assert message in str(refused.value)


def test_keys_and_limits_go_together() -> None:
    with pytest.raises(ValueError, match="concurrency_key goes with concurrency_limit or rate"):
        JobType("fetch", _noop, concurrency_key="site")
    with pytest.raises(ValueError, match="concurrency_limit needs concurrency_key"):
        JobType("fetch", _noop, concurrency_limit=2)
    # a key with only a rate limit, a rate limit without a key: both fine
    JobType("fetch", _noop, concurrency_key="site", rate_limit=(5, 1))
    JobType("fetch", _noop, rate_limit=(5, 1))


def test_a_declared_rate_is_normalised_and_reaches_the_claim() -> None:
    registry = Registry("r")
    registry.register(JobType("fetch", _noop, concurrency_key="site", rate_limit=(5, 1)))
    registry.register(JobType("plain", _noop))
    fetch = registry.get("fetch")
    assert fetch.rate_limit == (5, 1.0)
    assert registry.flow_limits() == {"fetch": FlowLimit(rate=RateLimit(5, 1.0))}


def test_the_key_is_derived_as_a_concurrency_key_is() -> None:
    registry = Registry("r")
    registry.register(JobType("site", _noop, concurrency_key="site", rate_limit=(5, 1)))
    registry.register(JobType("org", _noop, rate_limit=(5, 1)))
    registry.register(JobType("all", _noop, rate_limit=(5, 1), concurrency_scope=KeyScope.GLOBAL))
    assert registry.new_job("org-a", "site", {"site": 3}).concurrency_key == '["org-a","3"]'
    assert registry.new_job("org-a", "org", {}).concurrency_key == '["org-a"]'
    assert registry.new_job("org-a", "all", {}).concurrency_key == ""
    jobs = registry.new_jobs("org-b", "org", [{}, {}])  # the bulk path derives it too
    assert [j.concurrency_key for j in jobs] == ['["org-b"]', '["org-b"]']


def test_the_window_is_half_open_and_slides() -> None:
    rate = RateLimit(2, 10.0)
    starts = recorded((), rate, T0, 2)
    assert room(starts, rate, T0 + timedelta(seconds=9.999)) == 0
    assert next_start(starts, rate, T0 + timedelta(seconds=5)) == T0 + timedelta(seconds=10)
    assert room(starts, rate, T0 + timedelta(seconds=10)) == 2
    assert next_start(starts, rate, T0 + timedelta(seconds=10)) is None
    # only the newest N are kept
    later = recorded(starts, rate, T0 + timedelta(seconds=10), 1)
    assert later == (T0 + timedelta(seconds=10), T0)


def test_no_window_ever_holds_more_than_n_starts_even_with_clocks_out_of_step() -> None:
    """Random claimers, each with its own clock up to 0.8 s off, claim in turn (serialised, as
    the key's lock serialises them): every window of P seconds holds at most N starts."""
    generator = random.Random(25)
    for _ in range(200):
        rate = RateLimit(generator.randint(1, 5), generator.choice([0.5, 1.0, 3.0]))
        starts: tuple[datetime, ...] = ()
        made: list[datetime] = []
        real = T0
        for _ in range(60):
            real += timedelta(seconds=generator.uniform(0, 0.4))
            now = real + timedelta(seconds=generator.uniform(-0.8, 0.8))
            wanted = generator.randint(1, 3)
            admitted = min(wanted, room(starts, rate, now))
            starts = recorded(starts, rate, now, admitted)
            made.extend([now] * admitted)
        made.sort()
        for i, first in enumerate(made):
            inside = [at for at in made[i:] if at < first + rate.period]
            assert len(inside) <= rate.count, (rate, made)
        assert in_window(made, rate, made[-1]) <= rate.count
