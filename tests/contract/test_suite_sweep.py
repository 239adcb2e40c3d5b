"""``jobs_contract.sweep``: the jobs of lost workers (docs/contract.md §5)
(on both adapters: conftest.py)."""

from jobs_contract.sweep import *  # noqa: F403
