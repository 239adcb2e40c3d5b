"""``jobs_contract.waits``: jobs that wait for others, dependencies and batches (decision
0041) (on both adapters: conftest.py)."""

from jobs_contract.waits import *  # noqa: F403
