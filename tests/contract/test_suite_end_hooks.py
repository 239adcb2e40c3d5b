"""``jobs_contract.end_hooks``: the end hooks at least once, their durable marker as the core
computed it (decision 0025) (on both adapters: conftest.py)."""

from jobs_contract.end_hooks import *  # noqa: F403
