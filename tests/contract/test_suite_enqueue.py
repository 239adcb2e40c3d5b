"""``jobs_contract.enqueue``: new jobs and their dedup keys (docs/contract.md §3)
(on both adapters: conftest.py)."""

from jobs_contract.enqueue import *  # noqa: F403
