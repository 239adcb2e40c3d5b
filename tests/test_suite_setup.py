"""The suite's own machinery: what the parallel run relies on is checked, not assumed."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("suite-check")
def test_xdist_groups_are_honoured(request: pytest.FixtureRequest) -> None:
    """Tests that share an expensive session fixture (the million rows of history) are put in one
    ``xdist_group`` so that one worker builds it; pytest 9.2 with pytest-xdist 3.8 silently
    stopped grouping (pytest-dev/pytest-xdist#1386) and each worker built its own copy."""
    if not getattr(request.config.option, "loadgroup", False):  # set on xdist workers only
        pytest.skip("the run is not distributed with --dist loadgroup")
    assert request.node.nodeid.endswith("@suite-check"), (
        f"--dist loadgroup ignored this test's xdist_group ({request.node.nodeid}): "
        "check the pytest / pytest-xdist pair pinned in pyproject.toml"
    )
