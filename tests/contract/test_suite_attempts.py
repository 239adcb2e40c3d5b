"""``jobs_contract.attempts``: claims, the end of attempts, progress, heartbeats, the fence
(docs/contract.md) (on both adapters: conftest.py)."""

from jobs_contract.attempts import *  # noqa: F403
