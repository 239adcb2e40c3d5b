"""``jobs_contract.workers``: the worker registry (docs/flow-control.md)
(on both adapters: conftest.py)."""

from jobs_contract.workers import *  # noqa: F403
