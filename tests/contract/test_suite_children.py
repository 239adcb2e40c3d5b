"""``jobs_contract.children``: what a handler enqueues with ``ctx.enqueue`` (decision 0038) (on
both adapters: conftest.py)."""

from jobs_contract.children import *  # noqa: F403
