"""``jobs_contract.stateful``: the property-based state machine of the store
(on both adapters: conftest.py)."""

from jobs_contract.stateful import *  # noqa: F403
