"""``jobs_contract.json_documents``: the JSON documents (docs/contract.md §7.1)
(on both adapters: conftest.py)."""

from jobs_contract.json_documents import *  # noqa: F403
