"""``jobs_contract.events``: the event feed (docs/events.md)
(on both adapters: conftest.py)."""

from jobs_contract.events import *  # noqa: F403
