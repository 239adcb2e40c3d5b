"""``jobs_contract.history``: every attempt of a job, kept (issue 24)
(on both adapters: conftest.py)."""

from jobs_contract.history import *  # noqa: F403
