"""``jobs_contract.org_jobs``: an org's reads and admin actions (docs/contract.md §2, §6)
(on both adapters: conftest.py)."""

from jobs_contract.org_jobs import *  # noqa: F403
