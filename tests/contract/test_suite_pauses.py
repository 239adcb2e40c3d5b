"""``jobs_contract.pauses``: paused job types (issue 24) (on both adapters: conftest.py)."""

from jobs_contract.pauses import *  # noqa: F403
