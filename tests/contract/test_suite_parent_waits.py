"""``jobs_contract.parent_waits``: a parent that waits for its children without a slot
(decision 0043) (on both adapters: conftest.py)."""

from jobs_contract.parent_waits import *  # noqa: F403
