"""``jobs_contract.flow_control``: flow control (docs/flow-control.md)
(on both adapters: conftest.py)."""

from jobs_contract.flow_control import *  # noqa: F403
