"""``jobs_contract.quotas``: the quota store and the enqueue admission (decision 0033)
(on both adapters: conftest.py)."""

from jobs_contract.quotas import *  # noqa: F403
