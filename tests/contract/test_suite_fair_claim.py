"""``jobs_contract.fair_claim``: the fair claim between orgs (docs/flow-control.md)
(on both adapters: conftest.py)."""

from jobs_contract.fair_claim import *  # noqa: F403
