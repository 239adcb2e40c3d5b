"""A site target's search data as one consistent set (issue 26, item 3): the view
``site_search_rows`` holds one row per record key (url, query, date, country, device) over its
done imports, the most recent upload winning — two overlapping exports, or an export imported
again after a correction, never count a day twice. On PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from jobs_imports.service import SearchTotals, SiteTargetNotFound

from tests.imports.helpers import HEADER, ORG_B, drain, upload

if TYPE_CHECKING:
    from jobs_imports.registry import ImportsModule
    from jobs_imports.service import SiteTarget

pytestmark = pytest.mark.postgres

# the last 28 days, then the last 90 days: the second covers the first's days again, and its
# figure for 2025-01-02 was revised since
LAST_28 = HEADER + (
    "https://www.example.com/a,shoes,10,100,10%,1.5,2025-01-02\n"
    "https://www.example.com/a,shoes,20,200,10%,1.5,2025-01-03\n"
)
LAST_90 = HEADER + (
    "https://www.example.com/a,shoes,5,50,10%,1.5,2025-01-01\n"
    "https://www.example.com/a,shoes,12,120,10%,1.5,2025-01-02\n"
    "https://www.example.com/a,shoes,20,200,10%,1.5,2025-01-03\n"
)


def test_two_overlapping_exports_count_each_day_once(
    module: ImportsModule, target: SiteTarget
) -> None:
    upload(module, target, LAST_28)
    drain(module)
    assert module.service.search_totals(target.org_id, target.id) == SearchTotals(2, 30, 300)
    upload(module, target, LAST_90)
    drain(module)
    # three days; 2025-01-02 from the later export (12, not 10 + 12)
    assert module.service.search_totals(target.org_id, target.id) == SearchTotals(3, 37, 370)


def test_an_export_imported_again_after_a_correction_replaces_its_values(
    module: ImportsModule, target: SiteTarget
) -> None:
    upload(module, target, LAST_90)
    drain(module)
    corrected = LAST_90.replace(",12,120,", ",15,150,")
    upload(module, target, corrected, "corrected.csv")
    drain(module)
    assert module.service.search_totals(target.org_id, target.id) == SearchTotals(3, 40, 400)


def test_only_done_imports_count(module: ImportsModule, target: SiteTarget) -> None:
    upload(module, target, LAST_28)
    assert module.service.search_totals(target.org_id, target.id) == SearchTotals(0, 0, 0)
    drain(module)
    upload(module, target, LAST_90)  # not run yet: its rows are not in the set
    assert module.service.search_totals(target.org_id, target.id) == SearchTotals(2, 30, 300)


def test_another_orgs_target_is_not_found(module: ImportsModule, target: SiteTarget) -> None:
    with pytest.raises(SiteTargetNotFound):
        module.service.search_totals(ORG_B, target.id)
