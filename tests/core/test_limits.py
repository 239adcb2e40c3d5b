"""The size check of reports and progress documents (jobs_core.limits): its shortcut for small
flat documents never calls a document under the limit that JSON puts over it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jobs_core.limits import oversize

from tests.profiles import scaled

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)


def _size(document: Any) -> int:
    return len(json.dumps(document, separators=(",", ":"), default=str))


@settings(max_examples=scaled(400))
@given(
    document=st.dictionaries(st.text(max_size=12), SCALARS, max_size=8),
    limit=st.integers(min_value=2, max_value=600),
)
def test_a_flat_document_is_over_exactly_when_its_json_is(
    document: dict[str, Any], limit: int
) -> None:
    size = _size(document)
    found = oversize(document, limit)
    if size > limit:
        assert found is not None
        assert found > limit
    else:
        assert found is None


def test_documents_the_shortcut_does_not_know_are_measured() -> None:
    assert oversize(None) is None
    assert oversize({"k": 10**40}, 30) is not None  # a long integer: encoded, 45 bytes
    assert oversize({"k": "\U0001f600" * 3}, 44) is None  # 3 surrogate pairs: 3 * 12 + 8
    assert oversize({"k": "\U0001f600" * 3}, 43) == 44
    assert oversize({"k": [1, 2, 3]}, 12) == 13  # not flat: encoded
