"""``jobs_contract.rate_limits``: rate limits per key (decision 0042)
(on both adapters: conftest.py)."""

from jobs_contract.rate_limits import *  # noqa: F403
