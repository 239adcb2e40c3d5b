"""``jobs_contract.store``: the store contract (docs/contract.md)
(on both adapters: conftest.py)."""

from jobs_contract.store import *  # noqa: F403
