"""jobs_core.codec beyond the contract suite: the flat payload's own JSON writer gives exactly the
text the general encoder gives, and every text reads back as the document returned with it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobs_core import PayloadInvalid, codec

from tests.profiles import scaled

_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
_SCALAR = st.one_of(
    _TEXT,
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)


@settings(derandomize=True, max_examples=scaled(300))
@given(st.dictionaries(_TEXT, _SCALAR, max_size=8))
def test_a_flat_payload_is_written_exactly_as_json_writes_it(payload: dict[str, Any]) -> None:
    text, document = codec.encode_payload(payload)
    assert text == json.dumps(payload, separators=(",", ":"))
    assert json.loads(text) == document == payload


@settings(derandomize=True, max_examples=scaled(200))
@given(
    st.recursive(
        _SCALAR,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
        max_leaves=20,
    )
)
def test_a_nested_payload_reads_back_as_the_document_returned(value: Any) -> None:
    text, document = codec.encode_payload({"v": value})
    assert json.loads(text) == document


def test_an_integer_too_long_for_text_is_refused_with_what_to_do() -> None:
    for payload in ({"n": 10**5000}, {"n": [10**5000]}):
        with pytest.raises(PayloadInvalid, match="send very long numbers as text"):
            codec.encode_payload(payload)


def test_a_document_is_normalised_into_a_new_object() -> None:
    report = {"rows": [1, 2], "n": 1}
    normalised = codec.normalise_document(report)
    assert normalised == report
    assert normalised is not report
    assert codec.encode_document(report) == '{"rows":[1,2],"n":1}'
