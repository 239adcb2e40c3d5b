"""``jobs_contract.transitions``: every store write is the core's transition (decision 0020)
(on both adapters: conftest.py)."""

from jobs_contract.transitions import *  # noqa: F403
