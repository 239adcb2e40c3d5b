"""``jobs_contract.checkpoint``: the private checkpoint, saved with the progress, never returned
with a job (decision 0025) (on both adapters: conftest.py)."""

from jobs_contract.checkpoint import *  # noqa: F403
