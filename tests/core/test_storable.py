"""Enqueue refuses what a store cannot hold alike on every adapter (PostgreSQL refuses NUL in
text and jsonb; JSON has no NaN), so the in-memory store never accepts what PostgreSQL would
reject."""

from __future__ import annotations

import math
from typing import Any

import pytest
from jobs_core import JobType, PayloadInvalid, Registry
from jobs_core.registry import unstorable


def test_storable_documents_pass() -> None:
    assert unstorable({"a": ["b", 1, 2.5, None, True, {"c": "d"}]}) == []


@pytest.mark.parametrize(
    ("document", "loc", "kind"),
    [
        ({"name": "a\x00b"}, ["name"], "nul"),
        ({"rows": [1, {"x": math.nan}]}, ["rows", 1, "x"], "finite_number"),
        ({"big": math.inf}, ["big"], "finite_number"),
        ({"outer": {"k\x00": 1}}, ["outer"], "nul"),
    ],
)
def test_unstorable_values_are_located(document: dict[str, Any], loc: list[Any], kind: str) -> None:
    [error] = unstorable(document)
    assert error["loc"] == loc
    assert error["type"] == kind


def test_enqueue_refuses_them_as_an_invalid_payload_or_key() -> None:
    registry = Registry()
    registry.register(JobType("t", lambda ctx: None))
    with pytest.raises(PayloadInvalid) as caught:
        registry.new_job("org", "t", {"s": "\x00"})
    assert caught.value.errors[0]["loc"] == ["s"]
    with pytest.raises(ValueError, match="NUL"):
        registry.new_job("org", "t", {}, dedup_key="k\x00")
