"""``jobs_contract.operator_reads``: the operator reads across orgs
(on both adapters: conftest.py)."""

from jobs_contract.operator_reads import *  # noqa: F403
