"""``jobs_contract.overview``: an org's operations view, counts, series and lookups (issue 24)
(on both adapters: conftest.py)."""

from jobs_contract.overview import *  # noqa: F403
