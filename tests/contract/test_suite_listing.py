"""``jobs_contract.listing``: bounded lists (on both adapters: conftest.py)."""

from jobs_contract.listing import *  # noqa: F403
